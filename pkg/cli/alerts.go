package cli

import (
	"context"
	"errors"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/check"
	"github.com/agentenv/watchdog/pkg/deliver"
	"github.com/agentenv/watchdog/pkg/version"
)

// buildSinks returns the configured alert sinks (possibly none: alerts then still
// reach logs and Events). namespace labels refreshed Alertmanager alerts; warn is
// told about an Alertmanager peer that failed while another accepted.
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
	return &deliver.Heartbeat{Poster: deliver.NewPoster("heartbeat", o.HeartbeatURL, o.AlertTimeout, attempts, budget), URL: o.HeartbeatURL}
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
