package backtest

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentenv/watchdog/internal/testenv"
	"github.com/agentenv/watchdog/pkg/backtest"
	"github.com/agentenv/watchdog/pkg/cli"
)

// gateway is an authenticating reverse proxy in front of the real Prometheus, as
// Mimir's, Cortex's or a Thanos gateway stands in front of their queriers: https
// with a certificate of a test CA, and every request must carry the credential
// and the tenant header, or it is refused as those gateways refuse it.
type gateway struct {
	URL    string
	CAFile string
	// passed counts the requests let through to Prometheus.
	passed atomic.Int32
}

func startGateway(t *testing.T, authorized func(*http.Request) bool) *gateway {
	t.Helper()
	target, err := url.Parse(prom.URL)
	if err != nil {
		t.Fatal(err)
	}
	g := &gateway{}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Scope-OrgID") != "team-a" {
			http.Error(w, "no org id", http.StatusUnauthorized)
			return
		}
		if !authorized(r) {
			http.Error(w, "authentication failed", http.StatusUnauthorized)
			return
		}
		g.passed.Add(1)
		proxy.ServeHTTP(w, r)
	}))
	caPEM, cert := testCA(t)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	g.URL = srv.URL
	g.CAFile = writeFile(t, "ca.pem", caPEM)
	return g
}

// testCA makes a CA and a serving certificate it signs for 127.0.0.1.
func testCA(t *testing.T) ([]byte, tls.Certificate) {
	t.Helper()
	caPEM, certPEM, keyPEM, err := testenv.TestCA("prometheus gateway", net.IPv4(127, 0, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return caPEM, cert
}

func writeFile(t *testing.T, name string, content []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, content, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// backtestVia runs `watchdog backtest` over bt-wedge's first 3 hours through url,
// returning the report (nil when it failed), the exit code and stderr.
func backtestVia(t *testing.T, url string, extra ...string) (*backtest.Result, int, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := append([]string{"backtest", "--prometheus-url", url, "-n", "bt-wedge",
		"--start", base.Format(time.RFC3339), "--end", base.Add(3 * time.Hour).Format(time.RFC3339), "-o", "json"}, extra...)
	code := cli.ExecuteContext(ctx, args, &stdout, &stderr)
	if code != 0 {
		return nil, code, stderr.String()
	}
	var res backtest.Result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("decode the JSON report: %v\n%s", err, stdout.String())
	}
	return &res, code, stderr.String()
}

// TestBacktestThroughAnAuthenticatingGateway: the backtest reads the history
// through an https gateway that wants a bearer token (or basic auth) and a
// tenant, given in --prometheus-http-config, and replays what a direct read replays;
// without the CA, the credential or the tenant it fails saying why, and no
// secret appears in what it prints.
func TestBacktestThroughAnAuthenticatingGateway(t *testing.T) {
	const token, password = "tok-3f9a7c", "pw-81d2e0"
	direct := backtestRun(t, "bt-wedge", base, base.Add(3*time.Hour))
	bearer := startGateway(t, func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer "+token })
	tokenFile := writeFile(t, "token", []byte(token+"\n"))
	// httpConfig is a --prometheus-http-config of these settings, and the tenant's header.
	httpConfig := func(settings ...string) []string {
		return []string{"--prometheus-http-config", writeFile(t, "http.yaml",
			[]byte(strings.Join(append(settings, "http_headers: {X-Scope-OrgID: {values: [team-a]}}"), "\n")))}
	}
	caConfig := func(g *gateway) string { return "tls_config: {ca_file: " + g.CAFile + "}" }
	res, code, stderr := backtestVia(t, bearer.URL, httpConfig(caConfig(bearer), "bearer_token_file: "+tokenFile)...)
	if code != 0 {
		t.Fatalf("through the bearer gateway: exit %d\n%s", code, stderr)
	}
	if bearer.passed.Load() == 0 || summaryLine(res) != summaryLine(direct) || len(res.Restarts) != len(direct.Restarts) {
		t.Errorf("through the gateway (%d requests): %s; direct: %s", bearer.passed.Load(), summaryLine(res), summaryLine(direct))
	}

	basic := startGateway(t, func(r *http.Request) bool {
		u, p, ok := r.BasicAuth()
		return ok && u == "grafana" && p == password
	})
	passFile := writeFile(t, "password", []byte(password))
	res, code, stderr = backtestVia(t, basic.URL, httpConfig(caConfig(basic),
		"basic_auth: {username: grafana, password_file: "+passFile+"}")...)
	if code != 0 || summaryLine(res) != summaryLine(direct) {
		t.Fatalf("through the basic-auth gateway: exit %d\n%s", code, stderr)
	}

	wrongToken := writeFile(t, "wrong", []byte("nope"))
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"without the CA", httpConfig("bearer_token_file: " + tokenFile), "certificate"},
		{"a wrong token", httpConfig(caConfig(bearer), "bearer_token_file: "+wrongToken), "authentication failed"},
		{"no tenant", []string{"--prometheus-http-config", writeFile(t, "http.yaml",
			[]byte(caConfig(bearer)+"\nbearer_token_file: "+tokenFile))}, "no org id"},
	} {
		before := bearer.passed.Load()
		_, code, stderr := backtestVia(t, bearer.URL, tc.args...)
		if code == 0 || !strings.Contains(stderr, tc.want) || bearer.passed.Load() != before {
			t.Errorf("%s: exit %d, want a failure saying %q, nothing let through:\n%s", tc.name, code, tc.want, stderr)
		}
		if tc.want != "certificate" && !strings.Contains(stderr, "see --prometheus-http-config") {
			t.Errorf("%s: a refused query does not name the credentials' flag:\n%s", tc.name, stderr)
		}
		if strings.Contains(stderr, token) || strings.Contains(stderr, password) {
			t.Errorf("%s: a secret in the output:\n%s", tc.name, stderr)
		}
	}

	// A missing secret file fails the first query, naming the file, and prints
	// none of the file's other secrets (a header's).
	missing, before := filepath.Join(t.TempDir(), "absent-password"), basic.passed.Load()
	_, code, stderr = backtestVia(t, basic.URL, "--prometheus-http-config", writeFile(t, "http.yaml", []byte(caConfig(basic)+
		"\nbasic_auth: {username: grafana, password_file: "+missing+"}\nhttp_headers: {X-Token: {secrets: ["+token+"]}}")))
	if code == 0 || !strings.Contains(stderr, missing) || strings.Contains(stderr, token) || basic.passed.Load() != before {
		t.Errorf("a missing password_file: exit %d, want a failure naming %s, no secret, nothing sent:\n%s", code, missing, stderr)
	}
}
