package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/check"
	"github.com/agentenv/watchdog/pkg/deliver"
	"github.com/agentenv/watchdog/pkg/version"
)

// buildSinks returns the configured alert sinks (possibly none: alerts still reach
// logs and Events); warn is told about an Alertmanager peer that failed while
// another accepted.
func buildSinks(o *AlertOptions, namespace string, warn func(error)) ([]alert.Sink, error) {
	var sinks []alert.Sink
	if o.SlackWebhookURL != "" {
		sinks = append(sinks, &deliver.Slack{
			Poster:     deliver.NewPoster("slack", o.SlackWebhookURL, o.AlertTimeout, deliver.DefaultAttempts, deliver.DefaultBudget),
			RunbookURL: o.RunbookURL,
		})
	}
	if o.WebhookURL != "" {
		sinks = append(sinks, &deliver.Webhook{
			Poster: deliver.NewPoster("webhook", o.WebhookURL, o.AlertTimeout, deliver.DefaultAttempts, deliver.DefaultBudget),
			Secret: []byte(o.WebhookSecret),
			Now:    time.Now,
		})
	}
	am, err := buildAlertmanager(o, namespace, warn)
	if err != nil {
		return nil, err
	}
	if am != nil {
		sinks = append(sinks, am)
	}
	return sinks, nil
}

// source is who sends this watchdog's alerts: the same on every one.
func (o *AlertOptions) source(namespace string) alert.Source {
	return alert.Source{Cluster: o.ClusterName, Namespace: namespace, Version: version.Version, Labels: o.Labels}
}

// newHeartbeat is the dead man's switch of o, with attempts within budget.
func newHeartbeat(o *AlertOptions, attempts int, budget time.Duration) *deliver.Heartbeat {
	return &deliver.Heartbeat{Poster: deliver.NewPoster("heartbeat", o.HeartbeatURL, o.AlertTimeout, attempts, budget)}
}

// pingHeartbeat tells the dead man's switch how the run went. A dry run pings
// nothing: it sends nothing at all.
func pingHeartbeat(ctx context.Context, o *AlertOptions, runErr error, dryRun bool, log zerolog.Logger) {
	if o.HeartbeatURL == "" || dryRun || errors.Is(runErr, check.ErrInterrupted) {
		// A pass cut short by its own shutdown is not a failure; the next run pings.
		return
	}
	// The run's own deadline may be spent (that may be why it failed): give the
	// ping a short deadline of its own.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*o.AlertTimeout)
	defer cancel()
	hb := newHeartbeat(o, 2, 2*o.AlertTimeout)
	body := "ok"
	var failure *check.Error
	switch {
	case errors.As(runErr, &failure) && failure.Step.Category != "":
		// The failed step's category, never the error text: that names the namespace,
		// the selector and the API server's address, and the switch is a third party.
		body = "failed: " + failure.Step.Category
	case runErr != nil:
		body = "failed: other"
	}
	if err := hb.Ping(pctx, runErr != nil, body); err != nil {
		log.Error().Err(err).Msg("dead man's switch ping failed")
		return
	}
	log.Debug().Bool("failed", runErr != nil).Msg("dead man's switch pinged")
}

// reportConfigFailure pings <heartbeat-url>/fail on a bad configuration (exit 2) of
// check or run, so the dead man's switch notices at the first run rather than
// after its grace period. The configuration may not have parsed at all, so the few
// settings needed are read again, leniently. A dry run or --validate-only sends
// nothing.
func reportConfigFailure(ctx context.Context, cmd *cobra.Command, args []string, cause error, stderr io.Writer) {
	if cmd == nil || (cmd.Name() != "check" && cmd.Name() != "run") || cmd.Parent() == nil || cmd.Parent().Parent() != nil {
		return
	}
	s := lenientSettings(args)
	if truthy(s["dry-run"]) || truthy(s[validateOnlyFlag]) || s["help"] != "" {
		return
	}
	hb := s["heartbeat-url"]
	if hb == "" {
		return
	}
	if err := checkURL(hb); err != nil {
		fmt.Fprintf(stderr, "watchdog: cannot tell the dead man's switch about the configuration error: --heartbeat-url: %v\n", err)
		return
	}
	timeout := 10 * time.Second
	if d, err := time.ParseDuration(s["alert-timeout"]); err == nil && d > 0 {
		timeout = d
	}
	o := &AlertOptions{HeartbeatURL: hb, AlertTimeout: timeout}
	log := zerolog.New(stderr).With().Timestamp().Logger()
	pingHeartbeat(ctx, o, &check.Error{Step: check.StepConfigure, Err: cause}, false, log)
	fmt.Fprintln(stderr, "watchdog: the configuration error was reported to the dead man's switch (<heartbeat-url>/fail)")
}

// lenientSettings reads the settings reportConfigFailure needs from args, ignoring
// other flags and parse errors, then from WATCHDOG_*.
func lenientSettings(args []string) map[string]string {
	names := []string{"heartbeat-url", "alert-timeout", "dry-run", validateOnlyFlag, "help"}
	fs := pflag.NewFlagSet("lenient", pflag.ContinueOnError)
	fs.ParseErrorsAllowlist.UnknownFlags = true
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	for _, n := range names {
		fs.String(n, "", "")
	}
	// Boolean flags may be given without a value: --dry-run means true.
	for _, n := range []string{"dry-run", validateOnlyFlag, "help"} {
		fs.Lookup(n).NoOptDefVal = "true"
	}
	fs.Lookup("help").Shorthand = "h"
	_ = fs.Parse(args)
	out := map[string]string{}
	for _, n := range names {
		if f := fs.Lookup(n); f.Changed {
			out[n] = f.Value.String()
		} else if v, ok := os.LookupEnv(EnvName(n)); ok && n != "help" {
			out[n] = v
		}
	}
	return out
}

func truthy(s string) bool {
	b, err := strconv.ParseBool(s)
	return err == nil && b
}
