package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/agentenv/watchdog/pkg/events"
	"github.com/agentenv/watchdog/pkg/evidence"
	"github.com/agentenv/watchdog/pkg/kube"
	"github.com/agentenv/watchdog/pkg/statestore"
	"github.com/agentenv/watchdog/pkg/statetext"
)

func newHistoryCommand(stdout, stderr io.Writer) *cobra.Command {
	var cluster ClusterOptions
	var output OutputOptions
	var ev EvidenceOptions
	var alerts AlertOptions // only --outbox-key: it checks the bundles' seals
	var since string
	var bundle string
	cmd := &cobra.Command{
		Use:   "history",
		Short: "What the watchdog saw and did, newest first: episodes, restarts, pauses, alerts",
		Long: `history lists, newest first, every bad episode, restart (its reason, evidence, the gates
it passed, its outcome, whether it healed, and the key of its evidence bundle), back-off
and open or undelivered alert in the state ConfigMap, and the watchdog's Events that
still exist (blocked restarts, alert deliveries; the API server keeps Events about an
hour). --evidence KEY prints one evidence bundle: the scheduler's last log lines, the
metrics and gates judged, the endpoints counted and the pod's status just before the
restart.

With --outbox-key (WATCHDOG_OUTBOX_KEY: the key the runs seal bundles with, in the
chart's Secret), history checks each bundle's seal, and marks one that does not
verify (edited since it was saved, or written by someone else) or that is not sealed.

It reads (get) the state and evidence ConfigMaps and lists Events in --namespace: run
it with your own kubeconfig. The chart's Role does not grant list events (no run
needs it), so as the watchdog's ServiceAccount history says in a note that it could
not read the Events and shows the rest.`,
		Example: `  # The last day.
  watchdog history -n agentenv-system --since 1d

  # The evidence of a restart (its key is in the history and the restarted alert).
  watchdog history --evidence 20261201T101500Z-agentenv-scheduler-7d9c4-x2k8p.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			markStarted(cmd)
			var p problems
			p.add(cluster.Validate())
			p.add(output.Validate())
			p.add(ev.Validate())
			var from time.Time // zero: everything kept
			if since != "" {
				var err error
				if from, err = parseSince(since, time.Now()); err != nil {
					p.addf("--since %q: %v", since, err)
				}
			}
			if err := p.err(); err != nil {
				return err
			}
			newLogger(&cluster, stderr)
			client, cfg, err := newClient(&cluster)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), cluster.Timeout)
			defer cancel()
			bundles, berr := evidence.Load(ctx, client, cluster.Namespace, ev.ConfigMap, []byte(alerts.OutboxKey))
			if bundle != "" {
				for _, b := range bundles {
					if b.Key == bundle {
						if output.Structured() {
							return encodeAs(stdout, output.Output, b)
						}
						return b.WriteText(stdout)
					}
				}
				if berr != nil {
					return fmt.Errorf("API server %s: %w", cfg.Host, berr)
				}
				return fmt.Errorf("no evidence bundle %q in %s/%s (it keeps the %d newest)", bundle, cluster.Namespace, ev.ConfigMap, evidence.MaxBundles)
			}
			snap, err := (&statestore.Store{Client: client, Namespace: cluster.Namespace, Name: cluster.StateConfigMap}).Load(ctx)
			if err != nil {
				return fmt.Errorf("API server %s: %w", cfg.Host, err)
			}
			entries := statetext.Entries(snap.State)
			statetext.MarkBundles(entries, bundles)
			evs, eerr := watchdogEvents(ctx, client, cluster.Namespace)
			entries = append(entries, evs...)
			entries = slices.DeleteFunc(entries, func(e statetext.Entry) bool { return e.At.Before(from) })
			statetext.NewestFirst(entries)
			h := statetext.History{Entries: entries}
			if eerr != nil {
				h.Notes = append(h.Notes, "Events not read: "+eerr.Error())
			}
			if berr != nil {
				h.Notes = append(h.Notes, "evidence: "+berr.Error())
			}
			if output.Structured() {
				return encodeAs(stdout, output.Output, h)
			}
			return h.WriteText(stdout)
		},
	}
	cluster.AddFlags(cmd.Flags())
	output.AddFlags(cmd.Flags())
	ev.AddFlags(cmd.Flags())
	alerts.AddOutboxFlag(cmd.Flags())
	if err := cmd.Flags().MarkHidden("evidence-logs"); err != nil { // a setting of the runs, not of reading
		panic(err)
	}
	cmd.Flags().StringVar(&since, "since", "", "only what happened since: a duration back from now (90m, 36h, 7d) or an RFC 3339 time, as backtest --start (default: everything kept)")
	cmd.Flags().StringVar(&bundle, "evidence", "", "print the evidence bundle with this `key` instead")
	return cmd
}

// parseSince reads --since as backtest reads --start (7d, 36h, an RFC 3339
// time), and a Go duration as before (1.5h, 90s, 1ns).
func parseSince(s string, now time.Time) (time.Time, error) {
	from, err := parseWhen(s, now)
	if err == nil {
		return from, nil
	}
	if d, derr := time.ParseDuration(s); derr == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, err
}

// watchdogEvents are the Events the watchdog left that the API server still keeps.
func watchdogEvents(ctx context.Context, c *kube.Client, ns string) ([]statetext.Entry, error) {
	list, err := c.ListEvents(ctx, ns, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("source", events.Component).String()})
	if err != nil {
		return nil, fmt.Errorf("list Events in %s: %w", ns, err)
	}
	var out []statetext.Entry
	for _, e := range list.Items {
		at := e.LastTimestamp.Time
		if at.IsZero() {
			at = e.EventTime.Time
		}
		out = append(out, statetext.Entry{At: at, Kind: "event", Pod: e.InvolvedObject.Name,
			What: e.Reason + " on " + e.InvolvedObject.Kind + "/" + e.InvolvedObject.Name, Reason: e.Message})
	}
	return out, nil
}
