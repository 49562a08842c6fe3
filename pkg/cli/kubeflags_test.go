package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
)

const kubeconfigTwoContexts = `apiVersion: v1
kind: Config
clusters:
- name: c1
  cluster: {server: "https://127.0.0.1:6443"}
- name: c2
  cluster: {server: "https://127.0.0.1:7443"}
users:
- name: u1
  user: {token: "tok-1"}
contexts:
- name: a
  context: {cluster: c1, user: u1, namespace: team-a}
- name: b
  context: {cluster: c2, user: u1, namespace: team-b}
- name: bare
  context: {cluster: c1, user: u1}
current-context: a
`

func parseCluster(t *testing.T, args ...string) *ClusterOptions {
	t.Helper()
	var o ClusterOptions
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	return &o
}

// kubectl's habits: the namespace comes from the kubeconfig context when -n is
// not given, $KUBECONFIG is read, and --context, --cluster, --user, --as,
// --as-group, --token, --server and --request-timeout mean what they mean there.
func TestKubectlConnectionFlags(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(path, []byte(kubeconfigTwoContexts), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", path)
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // not in a pod
	for _, c := range []struct {
		args []string
		ns   string
	}{
		{nil, "team-a"},
		{[]string{"--context", "b"}, "team-b"},
		{[]string{"--context", "bare"}, DefaultNamespace},
		{[]string{"-n", "elsewhere"}, "elsewhere"},
		{[]string{"--context", "b", "--namespace", "x"}, "x"},
	} {
		if got := parseCluster(t, c.args...).Namespace; got != c.ns {
			t.Errorf("%v: namespace %q, want %q", c.args, got, c.ns)
		}
	}

	o := parseCluster(t, "--context", "b", "--as", "system:serviceaccount:agentenv-system:watchdog", "--as-group", "ops", "--request-timeout", "7s")
	cfg, err := restConfig(o)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://127.0.0.1:7443" || cfg.Impersonate.UserName != "system:serviceaccount:agentenv-system:watchdog" ||
		len(cfg.Impersonate.Groups) != 1 || cfg.Impersonate.Groups[0] != "ops" || cfg.Timeout != 7*time.Second {
		t.Errorf("rest config: host %s impersonate %+v timeout %s", cfg.Host, cfg.Impersonate, cfg.Timeout)
	}
	o = parseCluster(t, "--server", "https://127.0.0.1:9443", "--token", "tok-2", "--cluster", "c2", "--user", "u1")
	cfg, err = restConfig(o)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://127.0.0.1:9443" || cfg.BearerToken != "tok-2" || cfg.Timeout != o.APITimeout {
		t.Errorf("rest config: host %s token %q timeout %s", cfg.Host, cfg.BearerToken, cfg.Timeout)
	}
}

// In a pod the configuration is in-cluster, which reads no kubeconfig
// overrides: --request-timeout, --as and --token must still apply, and an API
// request never waits on the run's deadline alone.
func TestKubectlFlagsApplyInAPod(t *testing.T) {
	for _, c := range []struct {
		timeout string
		want    time.Duration
		bad     bool
	}{
		{"", 0, false}, {"0", 0, false}, {"7s", 7 * time.Second, false}, {"5", 5 * time.Second, false}, {"2m", 2 * time.Minute, false},
		{"soon", 0, true}, {"-1s", 0, true}, {"18446744074", 0, true}, {"9300000000", 0, true},
	} {
		args := []string{"--as", "someone", "--token", "tok-3"}
		if c.timeout != "" {
			args = append(args, "--request-timeout", c.timeout)
		}
		var o ClusterOptions
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		if c.bad {
			// Refused before any connection, in a pod or not.
			if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--request-timeout") {
				t.Errorf("--request-timeout %q: Validate said %v, want a problem naming the flag", c.timeout, err)
			}
			continue
		}
		cfg := &rest.Config{Timeout: o.APITimeout, BearerTokenFile: "/var/run/secrets/kubernetes.io/serviceaccount/token"}
		inPodOverrides(cfg, &o)
		want := c.want
		if want == 0 {
			want = o.APITimeout
		}
		if cfg.Timeout != want || cfg.Impersonate.UserName != "someone" || cfg.BearerToken != "tok-3" ||
			cfg.BearerTokenFile != "" {
			t.Errorf("--request-timeout %q: timeout %s (want %s), impersonate %q, token %q file %q",
				c.timeout, cfg.Timeout, want, cfg.Impersonate.UserName, cfg.BearerToken, cfg.BearerTokenFile)
		}
	}
}

// A --server (or kubeconfig server) URL with credentials in it names the API server
// in logs, errors, reports and the pod proxy's scrape URL: the credentials become
// basic auth, as the HTTP client would send them, and the host shows none.
func TestServerURLCredentialsNeverShown(t *testing.T) {
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	const server = "https://admin:XXXXKUBEPASSSECRET@127.0.0.1:6443"
	cfg, err := restConfig(parseCluster(t, "--server", server))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://127.0.0.1:6443" || cfg.Username != "admin" || cfg.Password != "XXXXKUBEPASSSECRET" {
		t.Errorf("host %q, user %q, password %q: want the credentials as basic auth only", cfg.Host, cfg.Username, cfg.Password)
	}
	// Without its scheme, as client-go reads a bare host:port.
	cfg, err = restConfig(parseCluster(t, "--server", "admin:XXXXKUBEPASSSECRET@127.0.0.1:6443"))
	if err != nil || cfg.Host != "127.0.0.1:6443" || cfg.Username != "admin" || cfg.Password != "XXXXKUBEPASSSECRET" {
		t.Errorf("host %q, user %q, password %q, %v: want the credentials as basic auth only", cfg.Host, cfg.Username, cfg.Password, err)
	}
	for _, c := range []struct {
		server string
		code   int
	}{{server, ExitOK}, {"https://admin:XXXXKUBEPASSSECRET@127.0.0.1:bad", ExitUsage}, {"https://admin:XXXXKUBEPASSSECRET@a b", ExitUsage}} {
		var out strings.Builder
		if code := ExecuteContext(t.Context(), []string{"check", "--validate-only", "--server", c.server}, &out, &out); code != c.code ||
			strings.Contains(out.String(), "XXXXKUBEPASSSECRET") {
			t.Errorf("--server %s: exit %d, want %d without the password:\n%s", c.server, code, c.code, out.String())
		}
	}
}
