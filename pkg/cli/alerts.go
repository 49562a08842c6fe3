package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	amlabels "github.com/prometheus/alertmanager/pkg/labels"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/check"
	"github.com/agentenv/watchdog/pkg/deliver"
	"github.com/agentenv/watchdog/pkg/doctor"
	"github.com/agentenv/watchdog/pkg/version"
)

// buildSinks returns the configured alert sinks (possibly none: alerts still reach
// logs and Events), and the Alertmanager's firing alerts that hold restarts (nil: none);
// warn is told about an Alertmanager peer that failed while another accepted.
func buildSinks(o *AlertOptions, namespace string, warn func(error)) ([]alert.Sink, check.AlertHold, error) {
	var sinks []alert.Sink
	poster := func(name, url string) *deliver.Poster {
		return deliver.NewPoster(name, url, o.AlertTimeout, deliver.DefaultAttempts, deliver.DefaultBudget)
	}
	if o.SlackWebhookURL != "" {
		sinks = append(sinks, &deliver.Slack{Poster: poster("slack", o.SlackWebhookURL), RunbookURL: o.RunbookURL})
	}
	if o.WebhookURL != "" {
		sinks = append(sinks, &deliver.Webhook{Poster: poster("webhook", o.WebhookURL),
			Secret: []byte(o.WebhookSecret), Now: time.Now})
	}
	am := o.Alertmanager
	if len(am.URLs) == 0 {
		return sinks, nil, nil
	}
	sink, err := deliver.NewAlertmanager(am.URLs, o.AlertTimeout, deliver.DefaultAttempts, deliver.DefaultBudget)
	if err != nil {
		return nil, nil, usagef("%v", err)
	}
	sink.Username, sink.Password, sink.BearerToken = am.Username, am.Password, am.BearerToken
	sink.TTL, sink.GeneratorURL, sink.RunbookURL = am.TTL, am.GeneratorURL, o.RunbookURL
	sink.Source, sink.Warn = o.source(namespace), warn
	sets, err := am.holdSets()
	if err != nil || len(sets) == 0 {
		return append(sinks, sink), nil, err
	}
	return append(sinks, sink), &deliver.AlertHold{Alertmanager: sink, Sets: sets}, nil
}

// source is who sends this watchdog's alerts: the same on every one.
func (o *AlertOptions) source(namespace string) alert.Source {
	return alert.Source{Cluster: o.ClusterName, Namespace: namespace, Version: version.Version, Labels: o.Labels}
}

func newHeartbeat(o *AlertOptions, attempts int, budget time.Duration) *deliver.Heartbeat {
	return &deliver.Heartbeat{Poster: deliver.NewPoster("heartbeat", o.HeartbeatURL, o.AlertTimeout, attempts, budget)}
}

// pingHeartbeat tells the dead man's switch how the run went; a dry run sends
// nothing, and a pass cut short by its own shutdown is no failure (the next pings).
func pingHeartbeat(ctx context.Context, o *AlertOptions, runErr error, dryRun bool, log zerolog.Logger) {
	if o.HeartbeatURL == "" || dryRun || errors.Is(runErr, check.ErrInterrupted) {
		return
	}
	// The run's own deadline may be spent (maybe why it failed): the ping has its own.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*o.AlertTimeout)
	defer cancel()
	hb := newHeartbeat(o, 2, 2*o.AlertTimeout)
	body := "ok"
	if failure, ok := errors.AsType[*check.Error](runErr); ok {
		// Never the error text: it names the namespace, the selector and the API
		// server, and the switch is a third party.
		body = "failed: " + failure.Step.Category
	} else if runErr != nil {
		body = "failed: other"
	}
	if err := hb.Ping(pctx, runErr != nil, body); err != nil {
		log.Error().Err(err).Msg("dead man's switch ping failed")
		return
	}
	log.Debug().Bool("failed", runErr != nil).Msg("dead man's switch pinged")
}

// AlertmanagerOptions configure the Alertmanager sink (docs/alerts.md); URLs, password, token are secret.
type AlertmanagerOptions struct {
	URLs         []string
	Username     string
	Password     string
	BearerToken  string
	TTL          time.Duration
	GeneratorURL string
	HoldOn       []string // matcher sets of alerts that hold restarts while they fire
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

// Validate reports every invalid flag in declaration order.
func (o *AlertmanagerOptions) Validate() error {
	var p problems
	creds := o.Username != "" || o.Password != "" || o.BearerToken != ""
	kind := postURL // an in-cluster Alertmanager Service usually speaks plain http
	if creds {
		kind = secretURL
	}
	for i, raw := range o.URLs {
		flag := "--alertmanager-url"
		if len(o.URLs) > 1 {
			flag = fmt.Sprintf("--alertmanager-url #%d", i+1)
		}
		if u, err := checkURL(raw, kind); err != nil {
			p.addf("%s: %v", flag, err)
		} else if u.RawQuery != "" || u.Fragment != "" {
			p.addf("%s: URL must not have a query or fragment (give the base URL; /api/v2/alerts is appended)", flag)
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
	holds, err := o.holdSets()
	p.add(err)
	if len(holds) > 0 && len(o.URLs) == 0 {
		p.addf("--hold-restarts-on-alert needs --alertmanager-url: the firing alerts are read from there")
	}
	p.url("--alertmanager-generator-url", o.GeneratorURL, linkURL)
	return p.err()
}

// holdSets parses --hold-restarts-on-alert: one set per flag, or per line of one
// (the chart's environment variable holds them all). An invalid set is reported
// and counted (nil).
func (o *AlertmanagerOptions) holdSets() ([]amlabels.Matchers, error) {
	var p problems
	var sets []amlabels.Matchers
	for _, set := range strings.Split(strings.Join(o.HoldOn, "\n"), "\n") {
		if strings.TrimSpace(set) == "" {
			continue
		}
		ms, err := deliver.ParseMatchers(set)
		if err != nil {
			p.addf("--hold-restarts-on-alert %q: %v", set, err)
		}
		sets = append(sets, ms)
	}
	return sets, p.err()
}

func newNotifyCommand(stdout, stderr io.Writer) *cobra.Command {
	notify := &cobra.Command{
		Use:   "notify",
		Short: "Alerting tools",
	}
	var alerts AlertOptions
	var timeout time.Duration
	var namespace string
	test := &cobra.Command{
		Use:   "test",
		Short: "Send a clearly marked test alert to every configured sink and report per sink",
		Long: `notify test sends one test alert (event "test", marked as a test in every payload) to
each configured sink: --slack-webhook-url, --webhook-url (signed with --webhook-secret
when set), --alertmanager-url (alert AgentenvWatchdogTest, ending after
--alertmanager-alert-ttl) and --heartbeat-url. It exits 1 if any sink (or Alertmanager
peer) failed, 2 if none is configured. doctor --send-test sends the same.`,
		Example: `  # Prove the Slack path works (prints "slack ok" or why not).
  watchdog notify test --slack-webhook-url "$SLACK_WEBHOOK_URL" --cluster-name prod-eu1

  # Alertmanager (an in-cluster one may be plain http): AgentenvWatchdogTest, ending by itself.
  WATCHDOG_ALERTMANAGER_URL=http://alertmanager.monitoring:9093 watchdog notify test

  # Every sink the chart configured, from the same variables the CronJob reads.
  export WATCHDOG_WEBHOOK_URL=https://alerts.example.com/hook WATCHDOG_WEBHOOK_SECRET="$KEY"
  watchdog notify test -n agentenv-system`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var p problems
			p.add(alerts.Validate())
			p.positive("--timeout", timeout)
			if err := p.err(); err != nil {
				return err
			}
			sinks, err := testSinks(&alerts, namespace, "notify test", true)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			failed := 0
			for _, s := range sinks {
				if err := s.Send(ctx); err != nil {
					failed++
					fmt.Fprintf(stdout, "%-10s FAILED: %v\n", s.Name, err)
				} else {
					fmt.Fprintf(stdout, "%-10s ok\n", s.Name)
				}
			}
			if failed > 0 {
				return fmt.Errorf("%d sink(s) failed", failed)
			}
			return nil
		},
	}
	alerts.AddFlags(test.Flags())
	hideFlags(test.Flags(), "hold-restarts-on-alert") // a setting of restarts, not of delivery
	test.Flags().DurationVar(&timeout, "timeout", time.Minute, "deadline for all deliveries")
	test.Flags().StringVarP(&namespace, "namespace", "n", "agentenv-system", "namespace named in the test alert")
	notify.AddCommand(test)
	return notify
}

// testSinks are the configured sinks, then the dead man's switch, each with its test
// delivery (notify test, doctor --send-test): command's clearly marked test alert, or a
// successful run's ping. An Alertmanager peer that failed while another accepted fails
// the test: a run would still deliver, but the HA group is short of a peer. None
// configured is a usage error when need.
func testSinks(o *AlertOptions, namespace, command string, need bool) ([]doctor.Sink, error) {
	var peerErr error // deliveries are sequential
	sinks, _, err := buildSinks(o, namespace, func(err error) { peerErr = errors.Join(peerErr, err) })
	if err != nil {
		return nil, err
	}
	if need && len(sinks) == 0 && o.HeartbeatURL == "" {
		return nil, usagef("no sink configured: set --slack-webhook-url, --webhook-url, " +
			"--alertmanager-url or --heartbeat-url")
	}
	now := time.Now().UTC()
	n := alert.Notification{
		SchemaVersion: alert.SchemaVersion, ID: fmt.Sprintf("test-%d", now.UnixNano()), Event: alert.EventTest, Severity: alert.SeverityInfo, Test: true,
		Reason: "This is a test alert from agentenv-scheduler-watchdog `" + command + "`; no action is needed.",
		Action: "none", Time: now, NextStep: "Nothing to do: this only proves the alert path works.",
	}
	o.source(namespace).Stamp(&n)
	var out []doctor.Sink
	for _, s := range sinks {
		ds := doctor.Sink{Name: s.Name(), Send: func(ctx context.Context) error {
			peerErr = nil
			if err := s.Send(ctx, n); err != nil || peerErr == nil {
				return err
			}
			return fmt.Errorf("accepted, but not by every peer: %w", peerErr)
		}}
		if r, ok := s.(alert.Reacher); ok {
			ds.Reach = r.Reach
		}
		out = append(out, ds)
	}
	if o.HeartbeatURL != "" {
		out = append(out, doctor.Sink{Name: "heartbeat", Reach: newHeartbeat(o, 1, o.AlertTimeout).Reach, Send: func(ctx context.Context) error {
			return newHeartbeat(o, deliver.DefaultAttempts, deliver.DefaultBudget).Ping(ctx, false, "watchdog "+command)
		}})
	}
	return out, nil
}
