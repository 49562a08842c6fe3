package cli_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentenv/watchdog/pkg/cli"
)

// pings is a loopback dead man's switch recording each request's path and body.
type pings struct {
	*httptest.Server
	mu  sync.Mutex
	got []string
}

func newPings(t *testing.T) *pings {
	p := &pings{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		p.mu.Lock()
		p.got = append(p.got, r.Method+" "+r.URL.Path+" "+string(body))
		p.mu.Unlock()
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *pings) list() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string{}, p.got...)
}

// cleanEnv drops the machine's WATCHDOG_* variables for the test.
func cleanEnv(t *testing.T) {
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, cli.EnvPrefix) {
			t.Setenv(name, "")
			_ = os.Unsetenv(name)
		}
	}
}

// A scheduled run with a bad configuration exits 2 and pings nothing, wherever the
// error is: an invalid flag value, an unknown flag, an invalid environment variable,
// flags that contradict each other; the heartbeat URL given as a flag or as
// WATCHDOG_HEARTBEAT_URL. The dead man's switch fires after its grace instead.
func TestConfigurationErrorPingsNothing(t *testing.T) {
	for _, c := range []struct {
		name    string
		args    []string
		env     map[string]string
		hbEnv   bool // the heartbeat URL comes from the environment
		wantErr string
	}{
		{name: "invalid flag value", args: []string{"check", "--wedged-for=bogus"}, wantErr: "wedged-for"},
		{name: "unknown flag", args: []string{"check", "--no-such-flag", "x"}, wantErr: "no-such-flag"},
		{name: "invalid environment variable", args: []string{"check"}, env: map[string]string{"WATCHDOG_TIMEOUT": "soon"},
			hbEnv: true, wantErr: "WATCHDOG_TIMEOUT"},
		{name: "contradicting flags", args: []string{"check", "--timeout", "3s", "--scrape-timeout", "5s"},
			wantErr: "--scrape-timeout"},
		{name: "run mode", args: []string{"run", "--interval", "10ms"}, hbEnv: true, wantErr: "--interval"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cleanEnv(t)
			p := newPings(t)
			hb := p.URL + "/ping/abc"
			args := c.args
			if c.hbEnv {
				t.Setenv("WATCHDOG_HEARTBEAT_URL", hb)
			} else {
				args = append(append([]string{}, args...), "--heartbeat-url", hb)
			}
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			var stdout, stderr bytes.Buffer
			code := cli.ExecuteContext(context.Background(), args, &stdout, &stderr)
			if code != cli.ExitUsage || !strings.Contains(stderr.String(), c.wantErr) {
				t.Fatalf("exit %d, want 2 with %q\n%s", code, c.wantErr, stderr.String())
			}
			if got := p.list(); len(got) != 0 {
				t.Fatalf("pinged %v", got)
			}
		})
	}
}

// --validate-only builds the configuration and exits 0 without any request to the
// API server or an alert sink; a bad configuration exits 2.
func TestValidateOnly(t *testing.T) {
	cleanEnv(t)
	api := newPings(t) // any request here would be an API call
	sink := newPings(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(strings.Replace(loopbackKubeconfig, "https://127.0.0.1:1", api.URL, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("WATCHDOG_KUBECONFIG", kubeconfig)
	t.Setenv("WATCHDOG_HEARTBEAT_URL", sink.URL)
	t.Setenv("WATCHDOG_WEBHOOK_URL", sink.URL)
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"check", "--validate-only"}, cli.ExitOK},
		{[]string{"check", "--validate-only", "--restart-method", "rollout", "--runbook-url", "http://wiki.internal/runbook"}, cli.ExitOK},
		{[]string{"run", "--validate-only", "--leader-elect"}, cli.ExitOK},
		{[]string{"check", "--validate-only", "--restart-method", "reboot"}, cli.ExitUsage},
		{[]string{"check", "--validate-only", "--kubeconfig", "/nonexistent"}, cli.ExitUsage},
		{[]string{"run", "--validate-only", "--metrics-addr", "nope"}, cli.ExitUsage},
	} {
		var stdout, stderr bytes.Buffer
		if code := cli.ExecuteContext(context.Background(), c.args, &stdout, &stderr); code != c.code {
			t.Errorf("%v: exit %d, want %d\n%s", c.args, code, c.code, stderr.String())
		}
	}
	if got := append(api.list(), sink.list()...); len(got) != 0 {
		t.Errorf("--validate-only made requests: %v", got)
	}
}

// --validate-only needs no kubeconfig and no cluster: with none anywhere (no flag,
// no $KUBECONFIG, no ~/.kube/config, not in a pod) the flags are still checked and
// the API client is reported as not checked.
func TestValidateOnlyWithoutKubeconfig(t *testing.T) {
	cleanEnv(t)
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"check", "--validate-only"}, cli.ExitOK, "not checked: no kubeconfig"},
		{[]string{"run", "--validate-only", "--leader-elect"}, cli.ExitOK, "not checked: no kubeconfig"},
		{[]string{"check", "--validate-only", "--wedged-for", "bogus"}, cli.ExitUsage, "wedged-for"},
		{[]string{"check", "--validate-only", "--webhook-url", "http://example.com/hook"}, cli.ExitUsage, "webhook-url"},
		{[]string{"check", "--validate-only", "--kubeconfig", "/nonexistent"}, cli.ExitUsage, "/nonexistent"},
		{[]string{"check", "--validate-only", "--log-level", "INFO"}, cli.ExitOK, "not checked: no kubeconfig"},
	} {
		var stdout, stderr bytes.Buffer
		code := cli.ExecuteContext(context.Background(), c.args, &stdout, &stderr)
		if code != c.code || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: exit %d, want %d with %q in:\n%s", c.args, code, c.code, c.want, stderr.String())
		}
	}
}

// TestNoKubeconfigSaysWhereToPutOne: with no kubeconfig anywhere, a command that calls
// the API names --kubeconfig and KUBECONFIG (client-go's own message names only
// KUBERNETES_MASTER, which nobody sets), exit 2.
func TestNoKubeconfigSaysWhereToPutOne(t *testing.T) {
	cleanEnv(t)
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	for _, args := range [][]string{{"check", "-n", "agentenv-system"}, {"doctor", "-n", "agentenv-system"}, {"status", "-n", "agentenv-system"}} {
		var stdout, stderr bytes.Buffer
		code := cli.ExecuteContext(context.Background(), args, &stdout, &stderr)
		msg := stderr.String()
		if code != cli.ExitUsage || !strings.Contains(msg, "--kubeconfig") || !strings.Contains(msg, "KUBECONFIG") || strings.Contains(msg, "KUBERNETES_MASTER") {
			t.Errorf("%v: exit %d:\n%s", args, code, msg)
		}
	}
}

// A kubeconfig that exists but names no current context is not "no kubeconfig":
// --validate-only refuses it as the pass would, saying what is missing.
func TestValidateOnlyKubeconfigWithoutCurrentContext(t *testing.T) {
	cleanEnv(t)
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(strings.Replace(loopbackKubeconfig, "current-context: loopback\n", "", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", kubeconfig)
	for _, args := range [][]string{{"check", "--validate-only"}, {"check", "--dry-run"}} {
		var stdout, stderr bytes.Buffer
		code := cli.ExecuteContext(context.Background(), args, &stdout, &stderr)
		if code != cli.ExitUsage || !strings.Contains(stderr.String(), "no current context") {
			t.Errorf("%v: exit %d, want %d naming the missing current context:\n%s", args, code, cli.ExitUsage, stderr.String())
		}
	}
}
