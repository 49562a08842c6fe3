package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
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

// stateFlags are what status and history read the state ConfigMap with.
type stateFlags struct {
	cluster ClusterOptions
	output  OutputOptions
}

// read validates the flags and more (the command's own), connects, and calls f
// within --timeout.
func (s *stateFlags) read(cmd *cobra.Command, stderr io.Writer, f func(context.Context, *kube.Client, string) error, more ...error) error {
	var p problems
	p.add(s.cluster.Validate(), s.output.Validate())
	p.add(more...)
	if err := p.err(); err != nil {
		return err
	}
	newLogger(&s.cluster, stderr) // client-go's own lines (klog) stay JSON
	client, cfg, err := newClient(&s.cluster)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), s.cluster.Timeout)
	defer cancel()
	return f(ctx, client, cfg.Host)
}

func newStatusCommand(stdout, stderr io.Writer) *cobra.Command {
	var s stateFlags
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the persisted state: last run, pods, then restarts, alerts and episodes",
		Example: `  # The last run, each pod's episode, then the restarts, alerts and episodes as history lists them.
  watchdog status -n agentenv-system

  # The same as JSON, e.g. only the restart history.
  watchdog status -n agentenv-system -o json | jq '.state.restarts'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return s.read(cmd, stderr, func(ctx context.Context, client *kube.Client, host string) error {
				snap, err := readState(ctx, client, host, &s.cluster)
				if err != nil {
					return err
				}
				st := statetext.Status{ConfigMap: s.cluster.Namespace + "/" + s.cluster.StateConfigMap,
					ResourceVersion: snap.ResourceVersion, Warning: snap.Recovered, State: snap.State}
				return s.output.print(stdout, st, func(w io.Writer) error { return st.WriteText(w, time.Now()) })
			})
		},
	}
	addFlags(cmd, &s.cluster, &s.output)
	return cmd
}

func newHistoryCommand(stdout, stderr io.Writer) *cobra.Command {
	var s stateFlags
	var ev EvidenceOptions
	var since, bundle string
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

With the key the runs seal bundles with (the --key-secret Secret, read if it may be,
else --outbox-key), history checks each bundle's seal, and marks one that does not
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
			from, sinceErr := parseSince(since, time.Now())
			return s.read(cmd, stderr, func(ctx context.Context, client *kube.Client, host string) error {
				ns := s.cluster.Namespace
				key, _, _ := ev.sealKey(ctx, client, ns, false) // the runs' seal
				bundles, berr := evidence.Load(ctx, client, ns, ev.ConfigMap, key)
				if bundle != "" {
					i := slices.IndexFunc(bundles, func(b evidence.Bundle) bool { return b.Key == bundle })
					switch {
					case i >= 0:
						return s.output.print(stdout, bundles[i], bundles[i].WriteText)
					case berr != nil:
						return fmt.Errorf("API server %s: %w", host, berr)
					}
					return fmt.Errorf("no evidence bundle %q in %s/%s (it keeps the %d newest)", bundle, ns, ev.ConfigMap, evidence.MaxBundles)
				}
				snap, err := readState(ctx, client, host, &s.cluster)
				if err != nil {
					return err
				}
				entries := statetext.Entries(snap.State)
				statetext.MarkBundles(entries, bundles)
				evs, eerr := watchdogEvents(ctx, client, ns)
				entries = append(entries, evs...)
				entries = slices.DeleteFunc(entries, func(e statetext.Entry) bool { return e.At.Before(from) })
				statetext.NewestFirst(entries)
				h := statetext.History{Entries: entries}
				if snap.Recovered != "" {
					h.Notes = append(h.Notes, snap.Recovered)
				}
				if eerr != nil {
					h.Notes = append(h.Notes, "Events not read: "+eerr.Error())
				}
				if berr != nil {
					h.Notes = append(h.Notes, "evidence: "+berr.Error())
				}
				return s.output.print(stdout, h, h.WriteText)
			}, ev.Validate(), sinceErr)
		},
	}
	addFlags(cmd, &s.cluster, &s.output, &ev)
	hideFlags(cmd.Flags(), "evidence-logs") // a setting of the runs, not of reading
	cmd.Flags().StringVar(&since, "since", "", "only what happened since: a duration back from now (90m, 36h, 7d) or an RFC 3339 time, as backtest --start (default: everything kept)")
	cmd.Flags().StringVar(&bundle, "evidence", "", "print the evidence bundle with this `key` instead")
	return cmd
}

// parseSince reads --since as backtest reads --start; "" is the zero time: everything kept.
func parseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	from, err := parseWhen(s, now)
	if err != nil {
		return from, usagef("--since %q: %v", s, err)
	}
	return from, nil
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

// readState reads the state ConfigMap. A namespace without it is an error naming
// those that have it, when the identity may list.
func readState(ctx context.Context, client *kube.Client, host string, cluster *ClusterOptions) (*statestore.Snapshot, error) {
	ns, name := cluster.Namespace, cluster.StateConfigMap
	snap, err := (&statestore.Store{Client: client, Namespace: ns, Name: name}).Load(ctx)
	switch {
	case err != nil:
		return nil, fmt.Errorf("API server %s: %w", host, err)
	case snap.ResourceVersion != "":
		return snap, nil
	}
	msg := fmt.Sprintf("no watchdog state in namespace %s (ConfigMap %s not found)", ns, name)
	list, err := client.ListConfigMaps(ctx, "", metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s; other namespaces not searched: %v; give the watchdog's with -n", msg, err)
	case len(list.Items) == 0:
		return nil, fmt.Errorf("%s, nor in any other namespace: has the watchdog run yet? (watchdog doctor checks the install)", msg)
	}
	var where []string
	for _, cm := range list.Items {
		where = append(where, cm.Namespace)
	}
	slices.Sort(where)
	return nil, fmt.Errorf("%s; found in namespace %s: use -n %s", msg, strings.Join(where, ", "), where[0])
}
