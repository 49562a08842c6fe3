// Package statetext renders the state document for people and scripts: the
// entries of what the watchdog saw and did, as history lists them and status shows
// them, so that a restart, an alert or a back-off reads the same in both.
package statetext

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/utils/ptr"

	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/evidence"
	"github.com/agentenv/watchdog/pkg/state"
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

// History is what history prints: the entries, newest first, and what could not
// be read.
type History struct {
	Entries []Entry  `json:"entries"`
	Notes   []string `json:"notes,omitempty"`
}

// Status is what status prints: where the state was read, and the state.
type Status struct {
	ConfigMap       string       `json:"configMap"`
	ResourceVersion string       `json:"resourceVersion,omitempty"`
	Warning         string       `json:"warning,omitempty"`
	State           *state.State `json:"state"`
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// Entries turns the state document into entries, newest first.
func Entries(s *state.State) []Entry {
	var out []Entry
	for _, e := range s.Episodes {
		out = append(out, Entry{At: e.To, Kind: "episode", Pod: e.Pod, Evidence: string(e.Evidence), Outcome: string(e.Outcome),
			What: fmt.Sprintf("%s episode ended (%s): %s → %s", e.Kind, e.Outcome, rfc3339(e.From), rfc3339(e.To))})
	}
	for _, uid := range slices.Sorted(maps.Keys(s.Pods)) { // sorted: entries of one time print in the same order every time
		p := s.Pods[uid]
		if e := p.Episode; e != nil {
			out = append(out, Entry{At: e.Last, Kind: "episode", Pod: p.Name, Evidence: string(e.Evidence), Outcome: "open",
				What: fmt.Sprintf("%s since %s (%s so far), ready %d of %d", e.Kind, rfc3339(e.Since), decide.ShortDuration(e.For.D()), e.Ready, e.Expected)})
		}
	}
	for _, r := range s.Restarts {
		e := Entry{At: ptr.Deref(r.DoneAt, r.ClaimedAt), Kind: "restart", Pod: r.Pod, Reason: r.Reason, Evidence: string(r.Evidence), Gates: r.Gates,
			Outcome: string(r.Outcome), Healed: healed(r), Bundle: r.Bundle, What: fmt.Sprintf("restart by %s: %s", r.Method, r.Outcome)}
		if r.ResumedAt != nil {
			e.Notes = append(e.Notes, "the run that claimed it did not finish; a later run completed it at "+rfc3339(*r.ResumedAt))
		}
		if r.Error != "" {
			e.Notes = append(e.Notes, r.Error)
		}
		out = append(out, e)
	}
	for _, w := range s.WouldRestarts {
		e := Entry{At: w.At, Kind: "would-restart", Pod: w.Pod, Reason: w.Reason, Evidence: string(w.Evidence), Gates: w.Gates, Bundle: w.Bundle,
			What: fmt.Sprintf("shadow mode: would have restarted it %s into the episode (nothing was restarted)", decide.ShortDuration(w.At.Sub(w.EpisodeSince)))}
		if w.Repeats > 0 {
			e.Notes = append(e.Notes, fmt.Sprintf("due again %d more time(s) in the same episode, last %s", w.Repeats, rfc3339(w.LastAt)))
		}
		out = append(out, e)
	}
	if r := s.LastRun; r != nil && r.Paused != "" {
		out = append(out, Entry{At: r.At, Kind: "pause", What: r.Paused + "; the watchdog judges, records and pages, and restarts nothing"})
	}
	if b := s.Backoff; b != nil {
		out = append(out, Entry{At: b.LastRestartAt, Kind: "back-off", Reason: b.Why(),
			What: fmt.Sprintf("%d restart(s) in a row did not heal: next restart not before %s", b.Ineffective, rfc3339(b.NotBefore))})
	}
	for _, ev := range slices.Sorted(maps.Keys(s.Alerts)) {
		a := s.Alerts[ev]
		out = append(out, Entry{At: ptr.Deref(a.LastSentAt, a.OpenedAt), Kind: "alert", Pod: a.Pod,
			What: fmt.Sprintf("%s open since %s, sent %d time(s)", ev, rfc3339(a.OpenedAt), a.Sends)})
	}
	for _, p := range s.Outbox {
		out = append(out, Entry{At: p.CreatedAt, Kind: "alert", Reason: p.LastError,
			What: fmt.Sprintf("%s not yet delivered to %s after %d attempt(s)", p.Event, strings.Join(p.Sinks, ", "), p.Attempts)})
	}
	NewestFirst(out)
	return out
}

// NewestFirst sorts entries newest first; entries of one time keep their order.
func NewestFirst(entries []Entry) {
	slices.SortStableFunc(entries, func(a, b Entry) int { return b.At.Compare(a.At) })
}

// healed says whether restart r healed the scheduler, from its record: its
// replacement seen healthy (healedAt), or wedged again soon (ineffective); "" for a
// restart that was not carried out.
func healed(r state.Restart) string {
	switch {
	case r.HealedAt != nil:
		return "yes: its replacement was healthy at " + rfc3339(*r.HealedAt)
	case r.Ineffective != "":
		return "no: " + r.Ineffective
	case r.Outcome == state.RestartDone:
		return "not yet known: its replacement has not been seen healthy"
	}
	return ""
}

// MarkBundles notes, on each entry naming a bundle whose seal does not verify
// (or that is unsealed, when the key was given to check it), what that means.
func MarkBundles(entries []Entry, bundles []evidence.Bundle) {
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

// WriteText writes the entries, one line each with its details indented below,
// then the notes.
func (h History) WriteText(w io.Writer) error {
	if len(h.Entries) == 0 {
		fmt.Fprintln(w, "nothing recorded")
	}
	for _, e := range h.Entries {
		pod := ""
		if e.Pod != "" {
			pod = " " + e.Pod
		}
		termtext.Fprintf(w, "%s  %-13s%s: %s\n", rfc3339(e.At), e.Kind, pod, e.What)
		for _, kv := range [][2]string{{"reason", e.Reason}, {"evidence", e.Evidence}, {"gates", e.Gates}, {"healed", e.Healed}, {"evidence bundle", e.Bundle}} {
			if kv[1] != "" {
				termtext.Fprintf(w, "    %s: %s\n", kv[0], kv[1])
			}
		}
		for _, n := range e.Notes {
			termtext.Fprintf(w, "    note: %s\n", n)
		}
	}
	for _, n := range h.Notes {
		termtext.Fprintf(w, "note: %s\n", n)
	}
	return nil
}

// WriteText writes where the state was read, the last run, a table of the pods
// with their episodes, and then the state's entries as history writes them.
func (st Status) WriteText(w io.Writer, now time.Time) error {
	s := st.State
	termtext.Fprintf(w, "state: %s", st.ConfigMap)
	if st.ResourceVersion != "" {
		termtext.Fprintf(w, " (resourceVersion %s)", st.ResourceVersion)
	}
	fmt.Fprintln(w)
	if st.Warning != "" {
		termtext.Fprintf(w, "warning: %s\n", st.Warning)
	}
	if r := s.LastRun; r != nil {
		termtext.Fprintf(w, "last run: %s (%s ago, took %s): %s, verdict %s, action %s\n  %s\n",
			rfc3339(r.At), now.Sub(r.At).Round(time.Second), r.Took.D(), r.Outcome, r.Verdict, r.Action, r.Reason)
		if r.Error != "" {
			termtext.Fprintf(w, "  error: %s\n", r.Error)
		}
	} else {
		fmt.Fprintln(w, "last run: none recorded")
	}
	termtext.Fprintf(w, "unknown runs since the scheduler was last seen fine: %d\n\n", s.ConsecutiveUnknownRuns)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tUID\tLAST VERDICT\tLAST SEEN\tBAD\tBAD FOR\tEVIDENCE\tREJECTED")
	for _, uid := range slices.Sorted(maps.Keys(s.Pods)) {
		p := s.Pods[uid]
		bad, badFor, evidence := "-", "-", "-"
		if e := p.Episode; e != nil {
			bad, badFor, evidence = string(e.Kind)+" since "+rfc3339(e.Since), decide.ShortDuration(e.For.D()), cmp.Or(string(e.Evidence), "-")
		}
		rejected := "-"
		if p.Counters != nil {
			rejected = fmt.Sprint(p.Counters.HeartbeatRejected)
		}
		termtext.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Name, uid, p.LastVerdict, rfc3339(p.LastSeen), bad, badFor, evidence, rejected)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nhistory, newest first (watchdog history adds the watchdog's Events):")
	return History{Entries: Entries(s)}.WriteText(w)
}
