package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/agentenv/watchdog/pkg/check"
	"github.com/agentenv/watchdog/pkg/deliver"
	"github.com/spf13/pflag"
)

// AlertmanagerOptions configure the Alertmanager sink (docs/alerts.md). The URLs,
// the password and the token are secrets.
type AlertmanagerOptions struct {
	URLs         []string
	Username     string
	Password     string
	BearerToken  string
	TTL          time.Duration
	GeneratorURL string
	// HoldOn are the matcher sets of alerts that hold restarts while they fire.
	HoldOn []string

	holds [][]deliver.Matcher // HoldOn parsed, by Validate
}

func (o *AlertmanagerOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&o.URLs, "alertmanager-url", nil, "Alertmanager base URL, alerts go to <url>/api/v2/alerts; repeat it or give a comma list for an HA group, every peer gets every alert (secret)")
	fs.StringVar(&o.Username, "alertmanager-username", "", "basic auth user for --alertmanager-url")
	fs.StringVar(&o.Password, "alertmanager-password", "", "basic auth password for --alertmanager-url (secret)")
	fs.StringVar(&o.BearerToken, "alertmanager-bearer-token", "", "bearer token for --alertmanager-url (secret)")
	fs.DurationVar(&o.TTL, "alertmanager-alert-ttl", deliver.DefaultAlertmanagerTTL, "an alert posted to Alertmanager ends this long after its last post unless posted again; keep it above the time between two runs")
	fs.StringArrayVar(&o.HoldOn, "hold-restarts-on-alert", nil, "hold restarts while an alert matching this set fires in --alertmanager-url "+
		"(`matchers`, Alertmanager syntax: alertname=~\"etcd.*\",severity=\"critical\"); repeat (or one per line) for several sets; Alertmanager unreachable: restart allowed")
	fs.StringVar(&o.GeneratorURL, "alertmanager-generator-url", "", "generatorURL of every Alertmanager alert: a link to where the watchdog's runs can be seen (its logs, a dashboard)")
}

// Validate reports every invalid flag, in the order the flags are declared.
func (o *AlertmanagerOptions) Validate() error {
	var p problems
	creds := o.Username != "" || o.Password != "" || o.BearerToken != ""
	for i, raw := range o.URLs {
		flag := "--alertmanager-url"
		if len(o.URLs) > 1 {
			flag = fmt.Sprintf("--alertmanager-url #%d", i+1)
		}
		if err := checkAlertmanagerURL(raw, creds); err != nil {
			// Never echo the URL: it may carry credentials.
			p.addf("%s: %v", flag, err)
		}
	}
	if len(o.URLs) == 0 && creds {
		p.addf("Alertmanager credentials are set but --alertmanager-url is not")
	}
	if o.BearerToken != "" && (o.Username != "" || o.Password != "") {
		p.addf("set either --alertmanager-bearer-token or --alertmanager-username/--alertmanager-password, not both")
	}
	if o.Password != "" && o.Username == "" {
		p.addf("--alertmanager-password is set but --alertmanager-username is not")
	}
	if o.TTL < time.Second {
		p.addf("--alertmanager-alert-ttl %s is too short (at least 1s; keep it above the time between two runs)", o.TTL)
	}
	// One set per flag, or per line of one (the chart's environment variable holds them all).
	o.holds = nil
	for _, set := range strings.Split(strings.Join(o.HoldOn, "\n"), "\n") {
		if strings.TrimSpace(set) == "" {
			continue
		}
		ms, err := deliver.ParseMatchers(set)
		if err != nil {
			p.addf("--hold-restarts-on-alert %q: %v", set, err)
		}
		o.holds = append(o.holds, ms)
	}
	if len(o.holds) > 0 && len(o.URLs) == 0 {
		p.addf("--hold-restarts-on-alert needs --alertmanager-url: the firing alerts are read from there")
	}
	// A link people click, not a place the watchdog posts to: http is fine.
	if o.GeneratorURL != "" && checkLinkURL(o.GeneratorURL) != nil {
		p.addf("--alertmanager-generator-url %q: want an http(s) URL", o.GeneratorURL)
	}
	return p.err()
}

// checkAlertmanagerURL accepts https, and plain http too (an in-cluster
// Alertmanager Service usually speaks it) as long as no credentials would cross
// the network in clear text: credentials over http only to loopback.
func checkAlertmanagerURL(raw string, creds bool) error {
	u, err := parseURL(raw, true)
	if err != nil {
		return err
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("URL must not have a query or fragment (give the base URL; /api/v2/alerts is appended)")
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if (creds || u.User != nil) && !isLoopback(u.Hostname()) {
			return fmt.Errorf("credentials over plain http are accepted only for loopback addresses; use https")
		}
		return nil
	default:
		return fmt.Errorf("scheme %q: want https or http", u.Scheme)
	}
}

// checkRunInterval makes sure alerts outlive the time between two passes of `run`.
func (o *AlertmanagerOptions) checkRunInterval(interval time.Duration) error {
	if len(o.URLs) > 0 && o.TTL <= interval {
		return usagef("--alertmanager-alert-ttl %s must be longer than --interval %s, or open alerts resolve between passes", o.TTL, interval)
	}
	return nil
}

// buildAlertmanager returns the Alertmanager sink, or nil when no URL is set.
// warn is told about a peer of an HA group that failed while another accepted.
func buildAlertmanager(o *AlertOptions, namespace string, warn func(error)) (*deliver.Alertmanager, error) {
	am := o.Alertmanager
	if len(am.URLs) == 0 {
		return nil, nil
	}
	sink, err := deliver.NewAlertmanager(am.URLs, o.AlertTimeout, deliver.DefaultAttempts, deliver.DefaultBudget)
	if err != nil {
		return nil, usagef("%v", err)
	}
	sink.Username, sink.Password, sink.BearerToken = am.Username, am.Password, am.BearerToken
	sink.TTL, sink.GeneratorURL, sink.RunbookURL = am.TTL, am.GeneratorURL, o.RunbookURL
	sink.Source = o.source(namespace)
	sink.Warn = warn
	return sink, nil
}

// buildHold is the reader of the alerts that hold restarts, nil when none is
// configured.
func buildHold(o *AlertOptions, namespace string) (check.AlertHold, error) {
	if len(o.Alertmanager.holds) == 0 {
		return nil, nil
	}
	am, err := buildAlertmanager(o, namespace, nil)
	if err != nil {
		return nil, err
	}
	return &deliver.AlertHold{Alertmanager: am, Sets: o.Alertmanager.holds}, nil
}
