package cli

import (
	"context"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
)

// TestPrometheusHTTPConfigValidate: --prometheus-http-config is read and checked
// before a query is sent, each problem naming the file (FILE below); credentials
// never go over plain http beyond the machine, nor both in the URL and the file.
func TestPrometheusHTTPConfigValidate(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	token, ca := file("token", "s3cret\n"), file("ca.pem", "pem")
	for _, tc := range []struct {
		name, url, config string   // config "": no --prometheus-http-config
		want              []string // none: valid
	}{
		{name: "none", url: "http://prometheus.monitoring:9090"},
		{name: "bearer over https", url: "https://mimir.example/prometheus", config: "authorization: {credentials_file: " + token + "}"},
		{name: "bearer over port-forward", url: "http://127.0.0.1:9090", config: "bearer_token_file: " + token},
		{name: "bearer over plain http", url: "http://thanos.example:9090", config: "bearer_token: s3cret", want: []string{"clear text", "use https"}},
		{name: "missing file", url: "https://x.example", want: []string{"FILE", "no such file"}},
		{name: "unknown field", url: "https://x.example", config: "bearer_tokn_file: " + token, want: []string{"FILE", "bearer_tokn_file"}},
		{name: "basic auth", url: "https://x.example", config: "basic_auth: {username: grafana, password_file: " + token + "}"},
		{name: "bearer and basic", url: "https://x.example", config: "bearer_token_file: " + token + "\nbasic_auth: {username: grafana}", want: []string{"FILE", "at most one"}},
		{name: "credentials in URL and file", url: "https://u:p@x.example", config: "bearer_token_file: " + token, want: []string{"choose one", "xxxxx", "FILE"}},
		{name: "TLS over http", url: "http://x.example", config: "tls_config: {ca_file: " + ca + "}", want: []string{"FILE", "tls_config", "https"}},
		{name: "tenant over plain http", url: "http://mimir.monitoring", config: "http_headers: {X-Scope-OrgID: {values: [team-a]}}"},
		{name: "secret header over plain http", url: "http://mimir.monitoring", config: "http_headers: {X-Token: {secrets: [s3cret]}}", want: []string{"clear text"}},
		{name: "reserved header", url: "https://x.example", config: "http_headers: {authorization: {values: [x]}}", want: []string{"FILE", "not allowed"}},
		{name: "follow redirects", url: "https://x.example", config: "follow_redirects: true", want: []string{"FILE", "follows no redirect"}},
		{name: "oauth2", url: "https://x.example", config: "oauth2: {client_id: w, client_secret: s3cret, token_url: 'https://sso.example/token'}",
			want: []string{"FILE", "oauth2 is not supported"}},
		{name: "secret of the wrong type", url: "https://x.example", config: "http_headers: {X-Token: {secrets: s3cret}}", want: []string{"FILE", "line 1"}},
		// YAML errors quote what they could not read: none of these may show the secret.
		{name: "backquote in a secret", url: "https://x.example", config: "http_headers: {X-Token: {secrets: \"ab`s3cret\"}}",
			want: []string{"FILE", "line 1", "cannot unmarshal !!str into []config.Secret"}},
		{name: "two wrong secrets", url: "https://x.example", config: "http_headers: {X-Token: {secrets: \"x`\"}, Y: {secrets: \"s3cret\"}}",
			want: []string{"FILE", "line 1"}},
		{name: "typo beside a secret", url: "https://x.example", config: "basic_auth: {username: grafana, password:s3cret}",
			want: []string{"FILE", "line 1: details not shown"}},
		{name: "proxy URL that does not parse", url: "https://x.example", config: "proxy_url: \"http://user:s3cret%zzword@proxy\"",
			want: []string{"FILE", "a URL in it does not parse"}},
		{name: "secret with a tag", url: "https://x.example", config: "basic_auth: {username: u, password: !!int s3cretvalue12}",
			want: []string{"FILE", "details not shown"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bo := BacktestOptions{}
			if tc.config != "" {
				bo.HTTPConfig = file(strings.ReplaceAll(tc.name, " ", "-")+".yaml", tc.config)
			} else if tc.want != nil {
				bo.HTTPConfig = filepath.Join(dir, "absent.yaml")
			}
			u, err := url.Parse(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			want := slices.Clone(tc.want)
			if i := slices.Index(want, "FILE"); i >= 0 {
				want[i] = bo.HTTPConfig
			}
			err = bo.loadHTTPConfig(u)
			if !wantProblems(t, err, want) {
				return
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error %q shows the secret", err)
			}
		})
	}
}

// TestPrometheusClientHonoursTheProxyEnvironment: HTTP_PROXY reaches the API
// through the proxy, as any Go client (and the backtest before its client was
// prometheus/common's, which uses no proxy unless told) does. The host name
// never resolves: only the proxy can answer for it.
func TestPrometheusClientHonoursTheProxyEnvironment(t *testing.T) {
	var via string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		via = r.URL.Host
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"success","data":{"resultType":"vector","result":[]}}`)
	}))
	defer proxy.Close()
	t.Setenv("HTTP_PROXY", proxy.URL)
	t.Setenv("NO_PROXY", "")
	bo := BacktestOptions{PrometheusURL: "http://prometheus.invalid:9090", QueryTimeout: 10 * time.Second, MaxBytes: 1 << 20}
	client, err := loadedClient(&bo)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := promv1.NewAPI(client).Query(context.Background(), "up", time.Now()); err != nil || via != "prometheus.invalid:9090" {
		t.Errorf("query through HTTP_PROXY: %v, the proxy saw host %q", err, via)
	}
	// The file may say otherwise.
	bo.HTTPConfig = filepath.Join(t.TempDir(), "http.yaml")
	if err := os.WriteFile(bo.HTTPConfig, []byte("proxy_from_environment: false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadedClient(&bo); err != nil || bo.http.ProxyFromEnvironment {
		t.Errorf("proxy_from_environment: false: %v, from the environment: %t", err, bo.http.ProxyFromEnvironment)
	}
}

// loadedClient is bo's client with --prometheus-http-config (if any) read, as Validate reads it.
func loadedClient(bo *BacktestOptions) (api.Client, error) {
	u, err := url.Parse(bo.PrometheusURL)
	if err == nil {
		err = bo.loadHTTPConfig(u)
	}
	if err != nil {
		return nil, err
	}
	return bo.prometheusClient()
}

// TestPrometheusClientTalksHTTP2: through an https API whose CA only the file
// names, the client speaks HTTP/2 and says who it is.
func TestPrometheusClientTalksHTTP2(t *testing.T) {
	var proto, agent string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proto, agent = r.Proto, r.UserAgent()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"success","data":{"resultType":"vector","result":[]}}`)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	dir := t.TempDir()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	cfg := filepath.Join(dir, "http.yaml")
	if err := errors.Join(os.WriteFile(filepath.Join(dir, "ca.pem"), ca, 0o600),
		os.WriteFile(cfg, []byte("tls_config: {ca_file: ca.pem}\n"), 0o600)); err != nil {
		t.Fatal(err)
	}
	bo := BacktestOptions{PrometheusURL: srv.URL, HTTPConfig: cfg, QueryTimeout: 10 * time.Second, MaxBytes: 1 << 20}
	client, err := loadedClient(&bo)
	if err != nil {
		t.Fatal(err)
	}
	_, _, _, err = promv1.NewAPI(client).Query(context.Background(), "up", time.Now())
	if err != nil || proto != "HTTP/2.0" || !strings.HasPrefix(agent, "agentenv-scheduler-watchdog/") {
		t.Errorf("query: %v, over %q as %q", err, proto, agent)
	}
}
