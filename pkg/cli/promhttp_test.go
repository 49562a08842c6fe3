package cli

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
)

// TestPrometheusHTTPOptionsValidate: every credential and TLS flag is checked
// before a query is sent, each problem naming its flag; credentials never go
// over plain http beyond the machine.
func TestPrometheusHTTPOptionsValidate(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	token, empty, ca := file("token", "s3cret\n"), file("empty", "\n"), file("ca.pem", "pem")
	for _, tc := range []struct {
		name string
		url  string
		o    PrometheusHTTPOptions
		want []string // none: valid
	}{
		{name: "none", url: "http://prometheus.monitoring:9090"},
		{name: "bearer over https", url: "https://mimir.example/prometheus", o: PrometheusHTTPOptions{BearerTokenFile: token}},
		{name: "bearer over port-forward", url: "http://127.0.0.1:9090", o: PrometheusHTTPOptions{BearerTokenFile: token}},
		{name: "bearer over plain http", url: "http://thanos.example:9090", o: PrometheusHTTPOptions{BearerTokenFile: token}, want: []string{"clear text", "use https"}},
		{name: "missing token file", url: "https://x.example", o: PrometheusHTTPOptions{BearerTokenFile: filepath.Join(dir, "nope")}, want: []string{"--prometheus-bearer-token-file", "no such file"}},
		{name: "empty token file", url: "https://x.example", o: PrometheusHTTPOptions{BearerTokenFile: empty}, want: []string{"--prometheus-bearer-token-file", "is empty"}},
		{name: "basic auth", url: "https://x.example", o: PrometheusHTTPOptions{BasicAuthUser: "grafana", BasicAuthPassFile: token}},
		{name: "basic auth without password", url: "https://x.example", o: PrometheusHTTPOptions{BasicAuthUser: "grafana"}, want: []string{"go together"}},
		{name: "bearer and basic", url: "https://x.example", o: PrometheusHTTPOptions{BearerTokenFile: token, BasicAuthUser: "grafana", BasicAuthPassFile: token}, want: []string{"at most one"}},
		{name: "credentials in URL and flags", url: "https://u:p@x.example", o: PrometheusHTTPOptions{BearerTokenFile: token}, want: []string{"choose one", "xxxxx"}},
		{name: "CA over http", url: "http://x.example", o: PrometheusHTTPOptions{CAFile: ca}, want: []string{"--prometheus-ca-file", "https"}},
		{name: "cert without key", url: "https://x.example", o: PrometheusHTTPOptions{CertFile: ca}, want: []string{"go together"}},
		{name: "tenant", url: "https://x.example", o: PrometheusHTTPOptions{Tenant: "team-a", TenantHeader: DefaultTenantHeader}},
		{name: "bad tenant header", url: "https://x.example", o: PrometheusHTTPOptions{Tenant: "team-a", TenantHeader: "X Org"}, want: []string{"--prometheus-tenant-header"}},
		{name: "reserved tenant header", url: "https://x.example", o: PrometheusHTTPOptions{Tenant: "team-a", TenantHeader: "authorization"}, want: []string{"not allowed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate(tc.url)
			if !wantProblems(t, err, tc.want) {
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
	client, err := bo.prometheusClient()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := promv1.NewAPI(client).Query(context.Background(), "up", time.Now()); err != nil || via != "prometheus.invalid:9090" {
		t.Errorf("query through HTTP_PROXY: %v, the proxy saw host %q", err, via)
	}
}
