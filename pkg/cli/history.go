package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/events"
	"github.com/agentenv/watchdog/pkg/evidence"
	"github.com/agentenv/watchdog/pkg/kube"
	"github.com/agentenv/watchdog/pkg/state"
	"github.com/agentenv/watchdog/pkg/statestore"
	"github.com/agentenv/watchdog/pkg/termtext"
)

// Entry is one line of the history: something the watchdog saw or did.
type Entry struct {
	At   time.Time `json:"at"`
	Kind string    `json:"kind"` // episode, restart, would-restart, pause, back-off, alert, event
	Pod  string    `json:"pod,omitempty"`
	// What says it in a line; the fields below hold the details.
	What     string   `json:"what"`
	Reason   string   `json:"reason,omitempty"`
	Evidence string   `json:"evidence,omitempty"`
	Gates    string   `json:"gates,omitempty"`
	Outcome  string   `json:"outcome,omitempty"`
	Healed   string   `json:"healed,omitempty"`
	Bundle   string   `json:"bundle,omitempty"`
	Notes    []string `json:"notes,omitempty"`
}

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
						return writeBundleText(stdout, b)
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
			now := time.Now()
			entries := stateHistory(snap.State, now)
			markBundles(entries, bundles)
			evs, eerr := watchdogEvents(ctx, client, cluster.Namespace)
			entries = append(entries, evs...)
			entries = slices.DeleteFunc(entries, func(e Entry) bool { return e.At.Before(from) })
			slices.SortStableFunc(entries, func(a, b Entry) int { return b.At.Compare(a.At) })
			var notes []string
			if eerr != nil {
				notes = append(notes, "Events not read: "+eerr.Error())
			}
			if berr != nil {
				notes = append(notes, "evidence: "+berr.Error())
			}
			if output.Structured() {
				return encodeAs(stdout, output.Output, struct {
					Entries []Entry  `json:"entries"`
					Notes   []string `json:"notes,omitempty"`
				}{entries, notes})
			}
			return writeHistoryText(stdout, entries, notes)
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

// stateHistory turns the state document into entries.
func stateHistory(s *state.State, now time.Time) []Entry {
	var out []Entry
	for _, e := range s.Episodes {
		out = append(out, Entry{At: e.To, Kind: "episode", Pod: e.Pod, Evidence: string(e.Evidence), Outcome: string(e.Outcome),
			What: fmt.Sprintf("%s episode ended (%s): %s → %s", e.Kind, e.Outcome, e.From.UTC().Format(time.RFC3339), e.To.UTC().Format(time.RFC3339))})
	}
	for _, p := range s.Pods {
		if e := p.Episode; e != nil {
			out = append(out, Entry{At: e.Last, Kind: "episode", Pod: p.Name, Evidence: string(e.Evidence), Outcome: "open",
				What: fmt.Sprintf("%s since %s (%s so far), ready %d of %d", e.Kind, e.Since.UTC().Format(time.RFC3339), e.For.D(), e.Ready, e.Expected)})
		}
	}
	for _, r := range s.Restarts {
		at := r.ClaimedAt
		if r.DoneAt != nil {
			at = *r.DoneAt
		}
		e := Entry{At: at, Kind: "restart", Pod: r.Pod, Reason: r.Reason, Evidence: string(r.Evidence), Gates: r.Gates,
			Outcome: string(r.Outcome), Healed: healed(r), Bundle: r.Bundle, What: fmt.Sprintf("restart by %s: %s", r.Method, r.Outcome)}
		if r.Error != "" {
			e.Notes = append(e.Notes, r.Error)
		}
		out = append(out, e)
	}
	for _, w := range s.WouldRestarts {
		e := Entry{At: w.At, Kind: "would-restart", Pod: w.Pod, Reason: w.Reason, Evidence: string(w.Evidence), Gates: w.Gates, Bundle: w.Bundle,
			What: "shadow mode: would have restarted it (nothing was restarted)"}
		if w.Repeats > 0 {
			e.Notes = append(e.Notes, fmt.Sprintf("due again %d more time(s) in the same episode, last %s", w.Repeats, w.LastAt.UTC().Format(time.RFC3339)))
		}
		out = append(out, e)
	}
	if r := s.LastRun; r != nil && r.Paused != "" {
		out = append(out, Entry{At: r.At, Kind: "pause", What: r.Paused + "; the watchdog judges, records and pages, and restarts nothing"})
	}
	if b := s.Backoff; b != nil {
		out = append(out, Entry{At: b.LastRestartAt, Kind: "back-off", Reason: b.Reason,
			What: fmt.Sprintf("%d restart(s) in a row did not heal: next restart not before %s", b.Ineffective, b.NotBefore.UTC().Format(time.RFC3339))})
	}
	for ev, a := range s.Alerts {
		at := a.OpenedAt
		if a.LastSentAt != nil {
			at = *a.LastSentAt
		}
		out = append(out, Entry{At: at, Kind: "alert", Pod: a.Pod, Reason: a.Reason,
			What: fmt.Sprintf("%s open since %s, sent %d time(s)", ev, a.OpenedAt.UTC().Format(time.RFC3339), a.Sends)})
	}
	for _, p := range s.Outbox {
		out = append(out, Entry{At: p.CreatedAt, Kind: "alert", Reason: p.LastError,
			What: fmt.Sprintf("%s not yet delivered to %s after %d attempt(s)", p.Event, strings.Join(p.Sinks, ", "), p.Attempts)})
	}
	return out
}

// healed says whether restart r healed the scheduler, from its record: its
// replacement seen healthy (healedAt), or wedged again soon (ineffective); "" for a
// restart that was not carried out.
// markBundles notes, on each entry naming a bundle whose seal does not verify
// (or that is unsealed, when the key was given to check it), what that means.
func markBundles(entries []Entry, bundles []evidence.Bundle) {
	integrity := map[string]evidence.Integrity{}
	for _, b := range bundles {
		integrity[b.Key] = b.Integrity
	}
	for i, e := range entries {
		if in := integrity[e.Bundle]; e.Bundle != "" && (in == evidence.IntegrityBroken || in == evidence.IntegrityUnsealed) {
			entries[i].Notes = append(entries[i].Notes, "evidence bundle "+evidence.Integrities[in])
		}
	}
}

func healed(r state.Restart) string {
	switch {
	case r.HealedAt != nil:
		return "yes: its replacement was healthy at " + r.HealedAt.UTC().Format(time.RFC3339)
	case r.Ineffective != "":
		return "no: " + r.Ineffective
	case r.Outcome == state.RestartDone:
		return "not yet known: its replacement has not been seen healthy"
	}
	return ""
}

// watchdogEvents are the Events the watchdog left that the API server still keeps.
func watchdogEvents(ctx context.Context, c *kube.Client, ns string) ([]Entry, error) {
	list, err := c.ListEvents(ctx, ns, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("source", events.Component).String()})
	if err != nil {
		return nil, fmt.Errorf("list Events in %s: %w", ns, err)
	}
	var out []Entry
	for _, e := range list.Items {
		at := e.LastTimestamp.Time
		if at.IsZero() {
			at = e.EventTime.Time
		}
		out = append(out, Entry{At: at, Kind: "event", Pod: e.InvolvedObject.Name,
			What: e.Reason + " on " + e.InvolvedObject.Kind + "/" + e.InvolvedObject.Name, Reason: e.Message})
	}
	return out, nil
}

func writeHistoryText(w io.Writer, entries []Entry, notes []string) error {
	if len(entries) == 0 {
		fmt.Fprintln(w, "nothing recorded")
	}
	for _, e := range entries {
		pod := ""
		if e.Pod != "" {
			pod = " " + e.Pod
		}
		termtext.Fprintf(w, "%s  %-13s%s: %s\n", e.At.UTC().Format(time.RFC3339), e.Kind, pod, e.What)
		for _, kv := range [][2]string{{"reason", e.Reason}, {"evidence", e.Evidence}, {"gates", e.Gates}, {"healed", e.Healed}, {"evidence bundle", e.Bundle}} {
			if kv[1] != "" {
				termtext.Fprintf(w, "    %s: %s\n", kv[0], kv[1])
			}
		}
		for _, n := range e.Notes {
			termtext.Fprintf(w, "    note: %s\n", n)
		}
	}
	for _, n := range notes {
		termtext.Fprintf(w, "note: %s\n", n)
	}
	return nil
}

func writeBundleText(w io.Writer, b evidence.Bundle) error {
	termtext.Fprintf(w, "evidence %s\n", b.Key)
	if b.Integrity != "" {
		mark := "✓"
		if b.Integrity != evidence.IntegritySealed {
			mark = "✗"
		}
		termtext.Fprintf(w, "  seal: %s %s\n", mark, evidence.Integrities[b.Integrity])
	}
	termtext.Fprintf(w, "  %s of %s (%s) at %s: %s, %s evidence\n  reason: %s\n", b.Action, b.Pod, b.UID, b.At.Format(time.RFC3339), b.Verdict, b.Evidence, b.Reason)
	for _, g := range b.Gates {
		mark := "✓"
		if !g.OK {
			mark = "✗"
		}
		termtext.Fprintf(w, "  gate %s %s: %s\n", mark, g.Name, g.Detail)
	}
	if s := b.Sample; s != nil {
		var observed []string
		for _, status := range slices.Sorted(maps.Keys(s.Observed)) {
			observed = append(observed, fmt.Sprintf("%s %d", status, s.Observed[status]))
		}
		termtext.Fprintf(w, "  metrics: observed_nodes %s; heartbeats ok %d, rejected %d\n", strings.Join(observed, ", "), s.HeartbeatOK, s.HeartbeatRejected)
	}
	if e := b.Endpoints; e != nil {
		termtext.Fprintf(w, "  endpoints: %d serving node(s), %d lingering, in %d slice(s)\n", e.Serving, e.Lingering, e.Slices)
	}
	st := b.Status
	termtext.Fprintf(w, "  pod: phase %s, ready %v, running %v since %s, %s\n", st.Phase, st.Ready, st.Running, st.StartedAt.Format(time.RFC3339), alert.OrDash(st.Controller))
	for _, warn := range b.Warnings {
		termtext.Fprintf(w, "  warning: %s\n", warn)
	}
	if b.LogError != "" {
		termtext.Fprintf(w, "  log: not saved: %s\n", b.LogError)
		return nil
	}
	termtext.Fprintf(w, "  log (last %d line(s)):\n", strings.Count(b.Log, "\n"))
	for _, line := range strings.Split(strings.TrimSuffix(b.Log, "\n"), "\n") {
		termtext.Fprintf(w, "    %s\n", line)
	}
	return nil
}
