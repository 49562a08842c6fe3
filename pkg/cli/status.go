package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/kube"
	"github.com/agentenv/watchdog/pkg/state"
	"github.com/agentenv/watchdog/pkg/statestore"
	"github.com/agentenv/watchdog/pkg/termtext"
)

func newStatusCommand(stdout, stderr io.Writer) *cobra.Command {
	var cluster ClusterOptions
	var output OutputOptions
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the persisted state: last run, pods, restarts, open alerts",
		Example: `  # The last run, each pod's episode, the restart history and open alerts.
  watchdog status -n agentenv-system

  # The same as JSON, e.g. only the restart history.
  watchdog status -n agentenv-system -o json | jq '.state.restarts'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			markStarted(cmd)
			var p problems
			p.add(cluster.Validate())
			p.add(output.Validate())
			if err := p.err(); err != nil {
				return err
			}
			newLogger(&cluster, stderr) // client-go's own lines (klog) stay JSON
			client, cfg, err := newClient(&cluster)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), cluster.Timeout)
			defer cancel()
			store := &statestore.Store{Client: client, Namespace: cluster.Namespace, Name: cluster.StateConfigMap}
			snap, err := store.Load(ctx)
			if err != nil {
				return fmt.Errorf("API server %s: %w", cfg.Host, err)
			}
			if snap.ResourceVersion == "" {
				return noStateHere(ctx, client, cluster.Namespace, cluster.StateConfigMap)
			}
			if output.Structured() {
				return encodeAs(stdout, output.Output, statusJSON{ConfigMap: cluster.Namespace + "/" + cluster.StateConfigMap, ResourceVersion: snap.ResourceVersion, Warning: snap.Recovered, State: snap.State})
			}
			return writeStatusText(stdout, cluster.Namespace+"/"+cluster.StateConfigMap, snap, time.Now())
		},
	}
	cluster.AddFlags(cmd.Flags())
	output.AddFlags(cmd.Flags())
	return cmd
}

// noStateHere is status's error in a namespace without the watchdog's state: it
// says where the state ConfigMap is, when the identity may list ConfigMaps
// across namespaces.
func noStateHere(ctx context.Context, client *kube.Client, ns, name string) error {
	msg := fmt.Sprintf("no watchdog state in namespace %s (ConfigMap %s not found)", ns, name)
	list, err := client.ListConfigMaps(ctx, "", metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	switch {
	case err != nil:
		return fmt.Errorf("%s; other namespaces not searched: %v; give the watchdog's with -n", msg, err)
	case len(list.Items) == 0:
		return fmt.Errorf("%s, nor in any other namespace: has the watchdog run yet? (watchdog doctor checks the install)", msg)
	}
	var where []string
	for _, cm := range list.Items {
		where = append(where, cm.Namespace)
	}
	slices.Sort(where)
	return fmt.Errorf("%s; found in namespace %s: use -n %s", msg, strings.Join(where, ", "), where[0])
}

type statusJSON struct {
	ConfigMap       string       `json:"configMap"`
	ResourceVersion string       `json:"resourceVersion,omitempty"`
	Warning         string       `json:"warning,omitempty"`
	State           *state.State `json:"state"`
}

func writeStatusText(w io.Writer, where string, snap *statestore.Snapshot, now time.Time) error {
	s := snap.State
	termtext.Fprintf(w, "state: %s", where)
	if snap.ResourceVersion != "" {
		termtext.Fprintf(w, " (resourceVersion %s)", snap.ResourceVersion)
	}
	fmt.Fprintln(w)
	if snap.Recovered != "" {
		termtext.Fprintf(w, "warning: %s\n", snap.Recovered)
	}
	if r := s.LastRun; r != nil {
		termtext.Fprintf(w, "last run: %s (%s ago, took %s): %s, verdict %s, action %s\n  %s\n",
			r.At.Format(time.RFC3339), now.Sub(r.At).Round(time.Second), r.Took.D(), r.Outcome, r.Verdict, r.Action, r.Reason)
		if r.Error != "" {
			termtext.Fprintf(w, "  error: %s\n", r.Error)
		}
		if r.Paused != "" {
			fmt.Fprintf(w, "  %s: restarts nothing meanwhile\n", r.Paused)
		}
	} else {
		fmt.Fprintln(w, "last run: none recorded")
	}
	termtext.Fprintf(w, "unknown runs since the scheduler was last seen fine: %d\n", s.ConsecutiveUnknownRuns)
	if b := s.Backoff; b != nil {
		termtext.Fprintf(w, "restart back-off: %d restart(s) in a row did not heal; next restart not before %s\n  %s\n", b.Ineffective, b.NotBefore.Format(time.RFC3339), b.Reason)
	}
	fmt.Fprintln(w)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tUID\tLAST VERDICT\tLAST SEEN\tBAD\tBAD FOR\tEVIDENCE\tREJECTED")
	for _, uid := range slices.Sorted(maps.Keys(s.Pods)) {
		p := s.Pods[uid]
		bad, badFor, evidence := "-", "-", "-"
		if p.Episode != nil {
			bad, badFor, evidence = string(p.Episode.Kind)+" since "+p.Episode.Since.Format(time.RFC3339), decide.ShortDuration(p.Episode.For.D()), string(p.Episode.Evidence)
		}
		rejected := "-"
		if p.Counters != nil {
			rejected = fmt.Sprint(p.Counters.HeartbeatRejected)
		}
		termtext.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Name, uid, p.LastVerdict, p.LastSeen.Format(time.RFC3339), bad, badFor, evidence, rejected)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if n := len(s.Restarts); n > 0 {
		r := s.Restarts[n-1]
		termtext.Fprintf(w, "\nlast restart: %s %s by %s: %s, %s evidence\n  reason: %s\n", r.ClaimedAt.Format(time.RFC3339), r.Pod, r.Method, r.Outcome, alert.OrDash(string(r.Evidence)), r.Reason)
		if r.Gates != "" {
			termtext.Fprintf(w, "  gates: %s\n", r.Gates)
		}
		if h := healed(r); h != "" {
			termtext.Fprintf(w, "  healed: %s\n", h)
		}
		if r.Bundle != "" {
			termtext.Fprintf(w, "  evidence bundle: %s (watchdog history --evidence %s)\n", r.Bundle, r.Bundle)
		}
	}
	termtext.Fprintf(w, "\nrestarts (newest last, %d kept):\n", len(s.Restarts))
	for _, r := range s.Restarts {
		resumed := ""
		if r.ResumedAt != nil {
			resumed = " resumed " + r.ResumedAt.Format(time.RFC3339)
		}
		switch {
		case r.HealedAt != nil:
			resumed += " (healed)"
		case r.Ineffective != "":
			resumed += " (did not heal)"
		}
		if r.Error != "" {
			resumed += ": " + r.Error
		}
		termtext.Fprintf(w, "  %s  %-9s %s %s (%s)%s\n", r.ClaimedAt.Format(time.RFC3339), r.Outcome, r.Method, r.Pod, r.UID, resumed)
	}
	if len(s.WouldRestarts) > 0 {
		termtext.Fprintf(w, "would-restarts in shadow mode (newest last, %d kept; nothing was restarted):\n", len(s.WouldRestarts))
		for _, wr := range s.WouldRestarts {
			repeats := ""
			if wr.Repeats > 0 {
				repeats = fmt.Sprintf(" (again in %d later run(s), last %s)", wr.Repeats, wr.LastAt.Format(time.RFC3339))
			}
			termtext.Fprintf(w, "  %s  %s (%s), %s evidence, %s into the episode%s: %s\n", wr.At.Format(time.RFC3339), wr.Pod, wr.UID,
				alert.OrDash(string(wr.Evidence)), decide.ShortDuration(wr.At.Sub(wr.EpisodeSince)), repeats, wr.Gates)
		}
	}
	fmt.Fprintln(w, "open alerts:")
	for _, ev := range slices.Sorted(maps.Keys(s.Alerts)) {
		a := s.Alerts[ev]
		last := "never"
		if a.LastSentAt != nil {
			last = a.LastSentAt.Format(time.RFC3339)
		}
		termtext.Fprintf(w, "  %-16s opened %s, sent %d time(s), last %s: %s\n", ev, a.OpenedAt.Format(time.RFC3339), a.Sends, last, a.Reason)
	}
	termtext.Fprintf(w, "undelivered alerts: %d\n", len(s.Outbox))
	for _, p := range s.Outbox {
		termtext.Fprintf(w, "  %s %s to %v, %d attempt(s): %s\n", p.CreatedAt.Format(time.RFC3339), p.Event, p.Sinks, p.Attempts, p.LastError)
	}
	termtext.Fprintf(w, "episodes (newest last, %d kept):\n", len(s.Episodes))
	for _, e := range s.Episodes {
		termtext.Fprintf(w, "  %s → %s  %s %s (%s evidence): %s\n", e.From.Format(time.RFC3339), e.To.Format(time.RFC3339), e.Kind, e.Pod, e.Evidence, e.Outcome)
	}
	return nil
}
