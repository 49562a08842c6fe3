package cli

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/config"
	"github.com/spf13/pflag"
	"golang.org/x/net/http/httpguts"

	"github.com/agentenv/watchdog/pkg/httpbound"
	"github.com/agentenv/watchdog/pkg/version"
)

// PrometheusHTTPOptions say how to reach a Prometheus-compatible API that asks for
// credentials. They become a prometheus/common HTTPClientConfig, as Prometheus
// reads, so a secret is read from its file on every request (a rotated token is
// picked up) and never appears in a flag or a log.
type PrometheusHTTPOptions struct {
	BearerTokenFile   string
	BasicAuthUser     string
	BasicAuthPassFile string
	CAFile            string
	CertFile, KeyFile string
	Tenant            string
	TenantHeader      string
}

// DefaultTenantHeader is the tenant header of Mimir, Cortex and Loki.
const DefaultTenantHeader = "X-Scope-OrgID"

func (o *PrometheusHTTPOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.BearerTokenFile, "prometheus-bearer-token-file", "", "`file` holding a bearer token sent to --prometheus-url (read on every request)")
	fs.StringVar(&o.BasicAuthUser, "prometheus-basic-auth-username", "", "basic auth user name for --prometheus-url (with --prometheus-basic-auth-password-file)")
	fs.StringVar(&o.BasicAuthPassFile, "prometheus-basic-auth-password-file", "", "`file` holding the basic auth password (read on every request)")
	fs.StringVar(&o.CAFile, "prometheus-ca-file", "", "`file` of PEM CA certificates that sign an https --prometheus-url's certificate (default: the system's)")
	fs.StringVar(&o.CertFile, "prometheus-cert-file", "", "`file` of a PEM client certificate for an https --prometheus-url that asks for one (with --prometheus-key-file)")
	fs.StringVar(&o.KeyFile, "prometheus-key-file", "", "`file` of the client certificate's PEM key")
	fs.StringVar(&o.Tenant, "prometheus-tenant", "", "tenant sent in --prometheus-tenant-header (Mimir, Cortex; Thanos: --prometheus-tenant-header THANOS-TENANT)")
	fs.StringVar(&o.TenantHeader, "prometheus-tenant-header", DefaultTenantHeader, "header carrying --prometheus-tenant")
}

// Validate reports every problem with the options for the API at rawURL (a valid
// http or https URL).
func (o *PrometheusHTTPOptions) Validate(rawURL string) error {
	var p problems
	u, _ := url.Parse(rawURL) // the caller checked it
	readable := func(flag, file string, secret bool) {
		if file == "" {
			return
		}
		b, err := os.ReadFile(file)
		switch {
		case err != nil:
			p.addf("%s: %v", flag, err)
		case secret && strings.TrimSpace(string(b)) == "":
			p.addf("%s %s is empty", flag, file)
		}
	}
	readable("--prometheus-bearer-token-file", o.BearerTokenFile, true)
	readable("--prometheus-basic-auth-password-file", o.BasicAuthPassFile, true)
	readable("--prometheus-ca-file", o.CAFile, false)
	readable("--prometheus-cert-file", o.CertFile, false)
	readable("--prometheus-key-file", o.KeyFile, false)
	if (o.BasicAuthUser == "") != (o.BasicAuthPassFile == "") {
		p.addf("--prometheus-basic-auth-username and --prometheus-basic-auth-password-file go together")
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		p.addf("--prometheus-cert-file and --prometheus-key-file go together")
	}
	credentials := o.BearerTokenFile != "" || o.BasicAuthUser != ""
	if credentials && u.User != nil {
		p.addf("--prometheus-url %s carries credentials and so do the --prometheus-bearer-token-file or --prometheus-basic-auth flags: choose one", u.Redacted())
	}
	if credentials && u.Scheme == "http" && !isLoopback(u.Hostname()) {
		p.addf("--prometheus-url %s: credentials over plain http would cross the network in clear text: use https (or kubectl port-forward to localhost)", u.Redacted())
	}
	if (o.CAFile != "" || o.CertFile != "") && u.Scheme != "https" {
		p.addf("--prometheus-ca-file and --prometheus-cert-file apply to an https --prometheus-url, not %s", u.Redacted())
	}
	if o.Tenant != "" && !httpguts.ValidHeaderFieldName(o.TenantHeader) {
		p.addf("--prometheus-tenant-header %q is not a header name", o.TenantHeader)
	} else if o.Tenant != "" && !httpguts.ValidHeaderFieldValue(o.Tenant) {
		p.addf("--prometheus-tenant %q is not a header value", o.Tenant)
	}
	if len(p) == 0 {
		cfg := o.config()
		if err := cfg.Validate(); err != nil {
			p.addf("Prometheus HTTP client: %v", err)
		}
	}
	return p.err()
}

// config is the prometheus/common client configuration. It follows no redirect:
// the history comes from --prometheus-url, nowhere else.
func (o *PrometheusHTTPOptions) config() config.HTTPClientConfig {
	cfg := config.HTTPClientConfig{
		FollowRedirects: false,
		EnableHTTP2:     true,
		BearerTokenFile: o.BearerTokenFile,
		TLSConfig:       config.TLSConfig{CAFile: o.CAFile, CertFile: o.CertFile, KeyFile: o.KeyFile},
		// HTTPS_PROXY and NO_PROXY as every Go client honours them (prometheus/common's
		// default is no proxy).
		ProxyConfig: config.ProxyConfig{ProxyFromEnvironment: true},
	}
	if o.BasicAuthUser != "" {
		cfg.BasicAuth = &config.BasicAuth{Username: o.BasicAuthUser, PasswordFile: o.BasicAuthPassFile}
	}
	if o.Tenant != "" {
		cfg.HTTPHeaders = &config.Headers{Headers: map[string]config.Header{
			http.CanonicalHeaderKey(o.TenantHeader): {Values: []string{o.Tenant}},
		}}
	}
	return cfg
}

// prometheusClient reads each answer up to MaxBytes, within the query timeout,
// and follows no redirect, with the credentials, CA and tenant of o.HTTP.
func (o *BacktestOptions) prometheusClient() (api.Client, error) {
	rt, err := config.NewRoundTripperFromConfig(o.HTTP.config(), "watchdog-backtest",
		config.WithUserAgent("agentenv-scheduler-watchdog/"+version.Version))
	if err != nil {
		return nil, fmt.Errorf("building the Prometheus HTTP client: %w", err)
	}
	hc := httpbound.Client(rt, o.MaxBytes)
	hc.Timeout = o.QueryTimeout + 5*time.Second
	return api.NewClient(api.Config{Address: o.PrometheusURL, Client: hc})
}

// credentialHint names the flags that carry credentials when the API refused a
// query as unauthenticated or forbidden.
func credentialHint(err error) string {
	var pe *promv1.Error
	if !errors.As(err, &pe) || (!strings.HasSuffix(pe.Msg, " 401") && !strings.HasSuffix(pe.Msg, " 403")) {
		return ""
	}
	return "; the API wants credentials or a tenant: see --prometheus-bearer-token-file, --prometheus-basic-auth-username, --prometheus-tenant (docs/backtest.md)"
}
