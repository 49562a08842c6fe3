package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/deliver"
)

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
--alertmanager-alert-ttl) and --heartbeat-url. It exits 1 if any sink failed, 2 if none is
configured.`,
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
			sinks, err := buildSinks(&alerts, namespace, func(err error) {
				fmt.Fprintf(stdout, "%-10s partly failed (another peer accepted): %v\n", "alertmanager", err)
			})
			if err != nil {
				return err
			}
			if len(sinks) == 0 && alerts.HeartbeatURL == "" {
				return usagef("no sink configured: set --slack-webhook-url, --webhook-url, --alertmanager-url or --heartbeat-url")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			n := testNotification(&alerts, namespace, "notify test")
			failed := 0
			report := func(sink string, err error) {
				if err != nil {
					failed++
					fmt.Fprintf(stdout, "%-10s FAILED: %v\n", sink, err)
				} else {
					fmt.Fprintf(stdout, "%-10s ok\n", sink)
				}
			}
			for _, s := range sinks {
				report(s.Name(), s.Send(ctx, n))
			}
			if alerts.HeartbeatURL != "" {
				report("heartbeat", testHeartbeat(ctx, &alerts, "notify test"))
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

// testNotification is the clearly marked test alert of `notify test` and
// `doctor --send-test` (command names which).
func testNotification(o *AlertOptions, namespace, command string) alert.Notification {
	now := time.Now().UTC()
	n := alert.Notification{
		SchemaVersion: alert.SchemaVersion, ID: fmt.Sprintf("test-%d", now.UnixNano()), Event: alert.EventTest, Severity: alert.SeverityInfo, Test: true,
		Reason: "This is a test alert from agentenv-scheduler-watchdog `" + command + "`; no action is needed.",
		Action: "none", Time: now, NextStep: "Nothing to do: this only proves the alert path works.",
	}
	o.source(namespace).Stamp(&n)
	return n
}

// testHeartbeat pings the dead man's switch as a successful run would.
func testHeartbeat(ctx context.Context, o *AlertOptions, command string) error {
	return newHeartbeat(o, deliver.DefaultAttempts, deliver.DefaultBudget).Ping(ctx, false, "watchdog "+command)
}
