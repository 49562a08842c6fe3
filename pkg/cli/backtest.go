package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	"github.com/robfig/cron/v3"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	yamlv2 "go.yaml.in/yaml/v2"

	"github.com/agentenv/watchdog/pkg/backtest"
	"github.com/agentenv/watchdog/pkg/httpbound"
	"github.com/agentenv/watchdog/pkg/version"
)

// BacktestOptions say which history to replay and how the watchdog ran.
type BacktestOptions struct {
	PrometheusURL    string
	HTTPConfig       string // --prometheus-http-config
	QueryTimeout     time.Duration
	MaxBytes         int64
	Start, End       string
	Schedule         string
	TimeZone         string
	Interval         time.Duration
	Step             time.Duration
	backtest.Queries // the flags' selectors; an empty one is DefaultQueries'
	StopGapAfter     time.Duration

	from, to          time.Time // set by Validate
	schedule, stopGap cron.Schedule
	http              config.HTTPClientConfig
}

// DefaultPrometheusMaxBytes bounds a Prometheus answer (a week of one series at 15s: ~2 MB of JSON).
const DefaultPrometheusMaxBytes = 256 << 20

// DefaultSchedule is the chart's CronJob schedule.
const DefaultSchedule = "*/5 * * * *"

func (o *BacktestOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.PrometheusURL, "prometheus-url", "", "`URL` of the Prometheus (or compatible) HTTP API holding the history, e.g. http://localhost:9090 through kubectl port-forward")
	fs.StringVar(&o.HTTPConfig, "prometheus-http-config", "", "`file` configuring the HTTP client of --prometheus-url (credentials, TLS, headers such as a tenant) as promtool's --http.config.file does; docs/backtest.md")
	fs.DurationVar(&o.QueryTimeout, "prometheus-timeout", 30*time.Second, "timeout of each Prometheus query")
	fs.Int64Var(&o.MaxBytes, "prometheus-max-bytes", DefaultPrometheusMaxBytes, "largest Prometheus answer read (bytes); a larger one fails the backtest, saying so: shorten --start..--end or raise --step")
	fs.StringVar(&o.Start, "start", "7d", "start of the replay: RFC 3339 time, or a duration back from now (90m, 36h, 7d)")
	fs.StringVar(&o.End, "end", "now", "end of the replay: RFC 3339 time, a duration back from now, or now")
	fs.StringVar(&o.Schedule, "schedule", DefaultSchedule, "CronJob schedule of the simulated runs (cron syntax, as the CronJob controller reads it)")
	fs.StringVar(&o.TimeZone, "schedule-timezone", "UTC", "IANA time zone of --schedule and the stop-gap's, as the CronJob's timeZone (the controller's default is UTC)")
	fs.DurationVar(&o.Interval, "interval", 0, "simulate watchdog run with a pass every interval instead of the CronJob (0: CronJob)")
	fs.DurationVar(&o.Step, "step", 0, "resolution of --expected-query (0: how often it was recorded, found from --expected-series)")
	fs.StringVar(&o.Ready, "ready-series", "", "series selector of the scheduler's ready gauge (default: agentenv_scheduler_observed_nodes{namespace=<namespace>,status=\"ready\"})")
	fs.StringVar(&o.Rejected, "rejected-series", "", "series selector of the rejected-heartbeat counter (default: agentenv_scheduler_rpc_duration_seconds_count{namespace=<namespace>,rpc=\"Heartbeat\",status=\"invalid_argument\"})")
	fs.StringVar(&o.StartTime, "start-time-series", "", "series selector of the scheduler's process start (default: process_start_time_seconds{namespace=<namespace>,pod=~\"<deployment>-.+\"})")
	fs.StringVar(&o.Expected, "expected-query", "", "PromQL giving the serving node count, one series (default: kube-state-metrics' kube_endpointslice_endpoints of <nodes-service> on <nodes-port>, counted as discovery counts; docs/backtest.md)")
	fs.StringVar(&o.ExpectedSeries, "expected-series", "", "series selector recorded with the serving count, by the same scrape: how often it was recorded is the count's resolution and staleness (default: kube_endpointslice_info{namespace=<namespace>,endpointslice=~\"<nodes-service>-.+\"})")
	fs.StringVar(&o.PodReady, "pod-ready-series", "", "with --leader-lease: series selector of the scheduler pods' readiness, whose ready pod is the leader (default: kube_pod_status_ready{namespace=<namespace>,pod=~\"<deployment>-.+\",condition=\"true\"})")
	fs.StringVar(&o.PodLabel, "pod-label", "pod", "label naming the scheduler pod on its own series")
	fs.StringVar(&o.KSMPodLabel, "ksm-pod-label", "pod", "label naming the pod on kube-state-metrics' series (--pod-ready-series); exported_pod where it is scraped without honorLabels")
	fs.DurationVar(&o.StopGapAfter, "stop-gap-after", 5*time.Minute, "the stop-gap script's patience: it restarts once ready read 0 on runs this far apart")
}

// Validate reports every invalid flag in declaration order; now anchors relative times.
func (o *BacktestOptions) Validate(now time.Time, intervalSet bool) error {
	var p problems
	if o.PrometheusURL == "" {
		p.addf("--prometheus-url is required")
	} else if u, err := checkURL(o.PrometheusURL, linkURL); err != nil { // loadHTTPConfig checks credentials
		p.addf("--prometheus-url: %v", err)
	} else {
		p.add(o.loadHTTPConfig(u))
	}
	if o.MaxBytes < 1<<20 {
		p.addf("--prometheus-max-bytes must be at least 1048576 (1 MiB), got %d", o.MaxBytes)
	}
	p.positive("--prometheus-timeout", o.QueryTimeout)
	var err error
	if o.from, err = parseWhen(o.Start, now); err != nil {
		p.addf("--start %q: %v", o.Start, err)
	}
	if o.to, err = parseWhen(o.End, now); err != nil {
		p.addf("--end %q: %v", o.End, err)
	}
	if !o.from.IsZero() && !o.to.IsZero() && !o.to.After(o.from) {
		p.addf("--end %s is not after --start %s", o.to.Format(time.RFC3339), o.from.Format(time.RFC3339))
	}
	if o.to.After(now) {
		p.addf("--end %s is in the future", o.to.Format(time.RFC3339))
	}
	// In the zone the CronJob controller uses (cron loads it), never this machine's.
	if o.TimeZone == "" || o.TimeZone == "Local" {
		p.addf("--schedule-timezone %q is not an IANA time zone name", o.TimeZone)
	} else if o.schedule, err = cron.ParseStandard("CRON_TZ=" + o.TimeZone + " " + o.Schedule); err != nil {
		p.addf("--schedule %q in --schedule-timezone %q: %v", o.Schedule, o.TimeZone, err)
	}
	o.stopGap, _ = cron.ParseStandard("CRON_TZ=" + o.TimeZone + " " + DefaultSchedule)
	switch {
	case o.Interval < 0:
		p.addf("--interval must not be negative, got %s", o.Interval)
	case intervalSet && o.Interval > 0 && o.Schedule != DefaultSchedule:
		p.addf("--interval and --schedule: choose one (--interval simulates `watchdog run`, --schedule the CronJob)")
	case intervalSet && o.Interval > 0 && o.Interval < time.Second:
		p.addf("--interval %s is too short (at least 1s)", o.Interval)
	}
	p.notNegative("--step", o.Step)
	for _, l := range [][2]string{{"--pod-label", o.PodLabel}, {"--ksm-pod-label", o.KSMPodLabel}} {
		if !model.UTF8Validation.IsValidLabelName(l[1]) {
			p.addf("%s %q is not a label name", l[0], l[1])
		}
	}
	p.positive("--stop-gap-after", o.StopGapAfter)
	return p.err()
}

// parseWhen reads an RFC 3339 time, "now", or a duration back from now: Prometheus's
// (7d) or Go's (1.5h, 1ns).
func parseWhen(s string, now time.Time) (time.Time, error) {
	if s == "now" {
		return now, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if d, err := model.ParseDuration(s); err == nil {
		return now.Add(-time.Duration(d)), nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("want an RFC 3339 time (2026-11-24T08:00:00Z), a duration back from now (90m, 36h, 7d) or now")
}

// backtestHidden are check's flags that change no decision of a replay.
var backtestHidden = append([]string{
	"kubeconfig", "context", "state-configmap", "api-timeout",
	"scheduler-selector", "scheduler-container", "metrics-port", "metrics-path", "scrape-timeout", "metrics-max-bytes", "scrape-via",
	"max-watch-age", "dry-run", "shadow",
	"slack-webhook-url", "webhook-url", "webhook-secret", "heartbeat-url", "runbook-url", "cluster-name", "alert-timeout",
	"hold-restarts-on-alert", // the replay has no Alertmanager history to ask
}, KubeConnectionFlags()...)

func newBacktestCommand(stdout, stderr io.Writer) *cobra.Command {
	f := &checkFlags{}
	var bo BacktestOptions
	cmd := &cobra.Command{
		Use:   "backtest",
		Short: "Replay Prometheus history through the watchdog's decisions, beside the stop-gap script",
		Long: `backtest reads the scheduler's recorded metrics from Prometheus (ready nodes, rejected
heartbeats, process start) and the serving node count from kube-state-metrics, and
replays them through the same pass and flags as check: runs on the CronJob's schedule
(or every --interval, as watchdog run), confirmation samples, gates, restart budget,
back-off and alerts. It prints each episode, each restart the watchdog would have made,
each blocked restart and each alert, and a summary beside what the stop-gap script
(restart once ready read 0 on two runs 5 minutes apart) would have done.

A gap in the data is unknown, never bad. A restart is assumed to heal: the replacement
(a new pod) reads as many ready nodes as serve until the recorded pod heals by itself,
and then the record. With --leader-lease the leader is the pod kube-state-metrics recorded
ready. What history cannot show is taken as passing, and the report's header says what
(docs/backtest.md). Nothing in the cluster is read or touched.`,
		Example: `  # The last week, as the chart's CronJob would have run, through a port-forward.
  kubectl -n monitoring port-forward svc/prometheus-operated 9090 &
  watchdog backtest --prometheus-url http://localhost:9090 --start 7d

  # One incident, as JSON; with the run mode every 30 s.
  watchdog backtest --prometheus-url http://localhost:9090 \
    --start 2026-11-20T08:00:00Z --end 2026-11-21T23:00:00Z --interval 30s -o json | jq .summary`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(bo.Validate(time.Now(), cmd.Flags().Changed("interval"))); err != nil {
				return err
			}
			res, err := runBacktest(cmd.Context(), f, &bo, stderr)
			if err != nil {
				return err
			}
			return f.output.print(stdout, res, res.WriteText)
		},
	}
	addFlags(cmd, &f.cluster, &f.check, &f.alerts, &f.output, &bo)
	cmd.Flags().VisitAll(func(fl *pflag.Flag) {
		if strings.HasPrefix(fl.Name, "alertmanager-") || slices.Contains(backtestHidden, fl.Name) {
			fl.Hidden = true
		}
	})
	return cmd
}

func runBacktest(ctx context.Context, f *checkFlags, bo *BacktestOptions, stderr io.Writer) (*backtest.Result, error) {
	log := newLogger(&f.cluster, stderr)
	client, err := bo.prometheusClient()
	if err != nil {
		return nil, usagef("--prometheus-http-config %s: %v", bo.HTTPConfig, err)
	}
	if bo.PodReady != "" && f.check.LeaderLease == "" {
		return nil, usagef("--pod-ready-series tells an HA scheduler's leader and is read only with --leader-lease")
	}
	q := backtest.DefaultQueries(f.cluster.Namespace, f.check.Deployment, f.check.NodesService, f.check.NodesPort)
	if f.check.LeaderLease == "" {
		// History has no Lease: an HA scheduler's readiness is its leadership, read only for --leader-lease.
		q.PodReady = ""
	}
	for _, o := range []struct{ flag, query *string }{{&bo.Ready, &q.Ready}, {&bo.Rejected, &q.Rejected},
		{&bo.StartTime, &q.StartTime}, {&bo.Expected, &q.Expected}, {&bo.ExpectedSeries, &q.ExpectedSeries},
		{&bo.PodReady, &q.PodReady}, {&bo.PodLabel, &q.PodLabel}, {&bo.KSMPodLabel, &q.KSMPodLabel}} {
		*o.query = cmp.Or(*o.flag, *o.query)
	}
	u, _ := url.Parse(bo.PrometheusURL) // Validate parsed it
	where := u.Redacted()
	log.Info().Str("prometheus", where).Time("start", bo.from).Time("end", bo.to).Msg("reading history")
	h, err := backtest.Fetch(ctx, promv1.NewAPI(client), q, bo.from, bo.to, bo.Step, bo.QueryTimeout)
	if err != nil {
		hint := "" // the credentials' flag, when the API answered 401 or 403
		if pe, ok := errors.AsType[*promv1.Error](err); ok && (strings.HasSuffix(pe.Msg, " 401") ||
			strings.HasSuffix(pe.Msg, " 403")) {
			hint = "; the API wants credentials or a tenant: see --prometheus-http-config (docs/backtest.md)"
		}
		return nil, fmt.Errorf("read history from %s: %w%s", where, err, hint)
	}
	res, err := backtest.Run(ctx, h, backtest.Config{
		Check: f.options(), Deployment: f.check.Deployment, Timeout: f.cluster.Timeout,
		Schedule: bo.schedule, ScheduleSpec: "CRON_TZ=" + bo.TimeZone + " " + bo.Schedule, Interval: bo.Interval,
		StopGap: bo.stopGap, StopGapAfter: bo.StopGapAfter, Log: zerolog.Nop(),
	})
	if err != nil {
		return nil, err
	}
	res.Prometheus = where
	return res, nil
}

// loadHTTPConfig reads --prometheus-http-config, promtool's --http.config.file format, into o.http.
// HTTP/2 is on and HTTPS_PROXY and NO_PROXY apply, as to every Go client, unless the file says
// otherwise; no redirect is followed (httpbound.Client): the history comes from --prometheus-url.
func (o *BacktestOptions) loadHTTPConfig(u *url.URL) error {
	var p problems
	o.http = config.DefaultHTTPClientConfig // also an empty file's meaning
	var set map[string]any                  // the keys the file sets
	if o.HTTPConfig != "" {
		cfg, content, err := config.LoadHTTPConfigFile(o.HTTPConfig)
		if err == nil {
			err = yamlv2.Unmarshal(content, &set) // the decoder LoadHTTPConfigFile used
		}
		if err != nil {
			return usagef("--prometheus-http-config %s: %s", o.HTTPConfig, httpConfigError(err))
		}
		if len(set) > 0 {
			o.http = *cfg // bearer_token(_file) is now Authorization: Validate moved it
		}
	}
	if set["follow_redirects"] == true {
		p.addf("--prometheus-http-config %s: follow_redirects: the backtest follows no redirect", o.HTTPConfig)
	}
	_, env := set["proxy_from_environment"]
	if _, proxy := set["proxy_url"]; !env && !proxy {
		o.http.ProxyFromEnvironment = true
	}
	credentials := o.http.BasicAuth != nil || o.http.Authorization != nil || o.http.OAuth2 != nil
	if o.http.HTTPHeaders != nil {
		for _, h := range o.http.HTTPHeaders.Headers {
			credentials = credentials || len(h.Secrets)+len(h.Files) > 0
		}
	}
	if credentials && u.User != nil {
		p.addf("--prometheus-url %s carries credentials and so does --prometheus-http-config %s: choose one",
			u.Redacted(), o.HTTPConfig)
	}
	if clearText(u, credentials) {
		p.addf("--prometheus-url %s: credentials over plain http would cross the network in clear text: "+
			"use https (or kubectl port-forward to localhost)", u.Redacted())
	}
	if o.http.TLSConfig != (config.TLSConfig{}) && u.Scheme != "https" {
		p.addf("--prometheus-http-config %s: tls_config applies to an https --prometheus-url, not %s",
			o.HTTPConfig, u.Redacted())
	}
	if o.http.OAuth2 != nil { // prometheus/common fetches its token with no timeout, following redirects
		p.addf("--prometheus-http-config %s: oauth2 is not supported (its token request has no timeout): "+
			"use authorization with a credentials_file", o.HTTPConfig)
	}
	return p.err()
}

var (
	yamlTypeError  = regexp.MustCompile(`(?s)^(line \d+: cannot unmarshal \S+) .* (into \S+)$`)
	yamlFieldError = regexp.MustCompile(`^line \d+: field [a-z0-9_]+ (not found|already set) in type \S+$`)
	yamlLine       = regexp.MustCompile(`^line \d+`)
)

// httpConfigError says what is wrong with the file without its values: a YAML or URL error
// quotes what it could not read, maybe a secret. Only known shapes pass, one error at a time.
func httpConfigError(err error) string {
	if te, ok := errors.AsType[*yamlv2.TypeError](err); ok {
		said := make([]string, len(te.Errors))
		for i, e := range te.Errors {
			switch m := yamlTypeError.FindStringSubmatch(e); {
			case m != nil:
				said[i] = m[1] + " " + m[2]
			case yamlFieldError.MatchString(e): // a key such as bearer_tokn_file, not password:s3cret
				said[i] = e
			default:
				said[i] = cmp.Or(yamlLine.FindString(e), "a value") + ": details not shown"
			}
		}
		return strings.Join(said, "; ")
	}
	if _, ok := errors.AsType[*url.Error](err); ok {
		return "a URL in it does not parse (not shown: it may hold a password)"
	}
	if strings.ContainsAny(err.Error(), "`\n") {
		return "it does not load (details not shown: they may quote a secret)"
	}
	return err.Error()
}

// prometheusClient reads each answer up to MaxBytes, within the query timeout.
func (o *BacktestOptions) prometheusClient() (api.Client, error) {
	rt, err := config.NewRoundTripperFromConfig(o.http, "watchdog-backtest",
		config.WithUserAgent("agentenv-scheduler-watchdog/"+version.Version))
	if err != nil {
		return nil, fmt.Errorf("the Prometheus HTTP client: %w", err)
	}
	hc := httpbound.Client(rt, o.MaxBytes)
	hc.Timeout = o.QueryTimeout + 5*time.Second
	return api.NewClient(api.Config{Address: o.PrometheusURL, Client: hc})
}
