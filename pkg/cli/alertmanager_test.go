package cli

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/utils/clock"
)

func TestAlertmanagerOptionsValidate(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // "" valid, else a part of the usage error
	}{
		{nil, ""},
		{[]string{"--alertmanager-url", "https://am-0.example.com,https://am-1.example.com/prefix/"}, ""},
		{[]string{"--alertmanager-url", "https://am-0.example.com", "--alertmanager-url", "https://am-1.example.com"}, ""},
		// In-cluster Alertmanager Services speak plain http: fine without credentials.
		{[]string{"--alertmanager-url", "http://alertmanager-operated.monitoring:9093"}, ""},
		{[]string{"--alertmanager-url", "http://alertmanager-operated.monitoring:9093", "--alertmanager-bearer-token", "t0ken"}, "credentials over plain http"},
		{[]string{"--alertmanager-url", "http://u:p@alertmanager-operated.monitoring:9093"}, "credentials over plain http"},
		{[]string{"--alertmanager-url", "http://127.0.0.1:9093", "--alertmanager-username", "u", "--alertmanager-password", "p"}, ""},
		{[]string{"--alertmanager-url", "https://am.example.com", "--alertmanager-username", "u", "--alertmanager-bearer-token", "t"}, "not both"},
		{[]string{"--alertmanager-url", "https://am.example.com", "--alertmanager-password", "p"}, "--alertmanager-username is not"},
		{[]string{"--alertmanager-bearer-token", "t"}, "--alertmanager-url is not"},
		{[]string{"--alertmanager-url", "https://am.example.com?x=1"}, "query"},
		{[]string{"--alertmanager-url", "ftp://am.example.com"}, "scheme"},
		{[]string{"--alertmanager-url", "https://am.example.com,ftp://am2.example.com"}, "--alertmanager-url #2"},
		{[]string{"--alertmanager-alert-ttl", "0s"}, "--alertmanager-alert-ttl"},
		{[]string{"--alertmanager-generator-url", "https://grafana.example.com/explore"}, ""},
		{[]string{"--alertmanager-generator-url", "grafana"}, "--alertmanager-generator-url"},
	} {
		var o AlertOptions
		fs := pflag.NewFlagSet("check", pflag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		err := o.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: %v", c.args, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v: got %v, want a usage error naming %q", c.args, err, c.want)
		}
		if err != nil && (strings.Contains(err.Error(), "example.com") || strings.Contains(err.Error(), "monitoring")) {
			t.Errorf("%v: the error echoes the URL: %v", c.args, err)
		}
	}
}

func TestRunRefusesAlertTTLWithinInterval(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := ExecuteContext(context.Background(), []string{"run", "--alertmanager-url", "https://am.example.com",
		"--alertmanager-alert-ttl", "30s", "--interval", "30s"}, &stdout, &stderr)
	if code != ExitUsage || !strings.Contains(stderr.String(), "--alertmanager-alert-ttl 30s must be longer than --interval 30s") {
		t.Fatalf("exit %d, want %d:\n%s", code, ExitUsage, stderr.String())
	}
}

// TestAlertmanagerSecretsNeverEcho: the URL path, the token and the password, taken
// from the environment as the chart provides them, appear nowhere in what the
// watchdog prints, even when Alertmanager echoes the request in its error page or
// a value is refused.
func TestAlertmanagerSecretsNeverEcho(t *testing.T) {
	const (
		path  = "/XXXXAMPATHSECRET"
		token = "tok-XXXXAMTOKENSECRET"
		pass  = "pw-XXXXAMPASSSECRET"
	)
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusBadRequest) // final: no retry
		_, _ = io.WriteString(w, "bad request to "+r.URL.Path+" with "+r.Header.Get("Authorization"))
	}))
	defer echo.Close()
	markers := []string{"XXXXAMPATHSECRET", "XXXXAMTOKENSECRET", "XXXXAMPASSSECRET", "/api/v2/alerts"}

	run := func(env map[string]string, args ...string) (int, string) {
		for k, v := range env {
			t.Setenv(k, v)
		}
		var out bytes.Buffer
		code := ExecuteContext(context.Background(), append([]string{"notify", "test", "--namespace", "ns"}, args...), &out, &out)
		return code, out.String()
	}
	var outputs []string
	code, out := run(map[string]string{"WATCHDOG_ALERTMANAGER_URL": echo.URL + path, "WATCHDOG_ALERTMANAGER_BEARER_TOKEN": token})
	outputs = append(outputs, out)
	if code != ExitFailed || !strings.Contains(out, "alertmanager FAILED: alertmanager: answered 400 Bad Request") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	t.Setenv("WATCHDOG_ALERTMANAGER_BEARER_TOKEN", "")
	code, out = run(map[string]string{"WATCHDOG_ALERTMANAGER_USERNAME": "watchdog", "WATCHDOG_ALERTMANAGER_PASSWORD": pass})
	outputs = append(outputs, out)
	if code != ExitFailed || !strings.Contains(out, "<redacted>") {
		t.Fatalf("exit %d, the echoed credentials not redacted:\n%s", code, out)
	}
	// Refused values: credentials over plain http to another host.
	code, out = run(map[string]string{"WATCHDOG_ALERTMANAGER_URL": "http://am.example.com" + path})
	outputs = append(outputs, out)
	if code != ExitUsage {
		t.Fatalf("exit %d, want %d:\n%s", code, ExitUsage, out)
	}
	for _, o := range outputs {
		for _, m := range markers {
			if strings.Contains(o, m) {
				t.Errorf("output shows %q:\n%s", m, o)
			}
		}
	}
}

// The hold on firing alerts is wired through the command's own path: validate, then
// setup. Its reader is built exactly when --hold-restarts-on-alert is set (the Runner
// turns the gate on with it: pkg/check).
func TestHoldOnAlertsWiredAsTheCommandDoes(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://127.0.0.1:1\"}}]\n"+
		"users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, hold := range []bool{false, true} {
		f := &checkFlags{}
		cmd := &cobra.Command{}
		addFlags(cmd, &f.cluster, &f.check, &f.job, &f.alerts, &f.output, &f.evidence, &f.push)
		args := []string{"--kubeconfig", kubeconfig, "-n", "agentenv-system", "--alertmanager-url", "http://127.0.0.1:1"}
		if hold {
			args = append(args, "--hold-restarts-on-alert", `alertname=~"etcd.*"`)
		}
		if err := cmd.Flags().Parse(args); err != nil {
			t.Fatal(err)
		}
		if err := f.validate(); err != nil {
			t.Fatal(err)
		}
		p, err := f.setup(io.Discard, clock.RealClock{})
		if err != nil {
			t.Fatal(err)
		}
		if (p.Hold != nil) != hold {
			t.Errorf("--hold-restarts-on-alert set %v: its reader built %v", hold, p.Hold != nil)
		}
	}
}

// TestRefusedSecretFlagValueNotEchoed: a value the flag parser itself refuses (a
// bare quote in --alertmanager-url's comma list) is not quoted back: pflag's error
// quotes the value, here a URL with its password.
func TestRefusedSecretFlagValueNotEchoed(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := ExecuteContext(context.Background(), []string{"check", "--alertmanager-url", `https://u:XXXXAMPASSSECRET@am.example"`}, &stdout, &stderr)
	out := stdout.String() + stderr.String()
	if code != ExitUsage || !strings.Contains(out, "--alertmanager-url") || strings.Contains(out, "XXXXAMPASSSECRET") {
		t.Errorf("exit %d, want %d naming the flag without its value:\n%s", code, ExitUsage, out)
	}
}

// notify test, as doctor --send-test, fails when an Alertmanager peer refused the test
// alert that another accepted: the HA group is short of a peer.
func TestNotifyTestFailsOnARefusingPeer(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer up.Close()
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer down.Close()
	var stdout, stderr bytes.Buffer
	args := []string{"notify", "test", "--alertmanager-url", up.URL + "," + down.URL, "--alert-timeout", "2s"}
	code := ExecuteContext(context.Background(), args, &stdout, &stderr)
	if code != ExitFailed || !strings.Contains(stdout.String(), "alertmanager FAILED: accepted, but not by every peer") {
		t.Errorf("exit %d, want %d naming the refusing peer:\n%s%s", code, ExitFailed, stdout.String(), stderr.String())
	}
}
