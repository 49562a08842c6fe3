package check

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/deliver"
	"github.com/agentenv/watchdog/pkg/scrape"
	"github.com/agentenv/watchdog/pkg/state"
	"github.com/agentenv/watchdog/pkg/termtext"
)

// Report is what `watchdog check` prints: JSON for scripts (docs/design.md §4), text for people.
type Report struct {
	Verdict   state.Verdict `json:"verdict"`
	Action    state.Action  `json:"action"`
	DryRun    bool          `json:"dryRun"`
	Shadow    bool          `json:"shadow,omitempty"`
	Paused    *decide.Pause `json:"paused,omitempty"` // the Deployment's pause, while active
	Reason    string        `json:"reason"`
	Time      time.Time     `json:"time"`
	Took      string        `json:"took"`
	Cluster   string        `json:"cluster,omitempty"`
	Namespace string        `json:"namespace"`
	ScrapeVia scrape.Via    `json:"scrapeVia,omitempty"`
	// Targets are the pods judged; NotJudged the others (terminating, finished, HA
	// standbys) with why.
	Targets       []decide.Target    `json:"targets"`
	NotJudged     []NotJudged        `json:"notJudged,omitempty"`
	Restarts      []RestartReport    `json:"restarts,omitempty"`
	WouldRestarts []RestartReport    `json:"wouldRestarts,omitempty"` // shadow mode's, instead of restarts
	Alerts        []deliver.Delivery `json:"alerts,omitempty"`
	Samples       int                `json:"samples"` // observations taken
	StateWritten  bool               `json:"stateWritten"`
	Warnings      []string           `json:"warnings,omitempty"`
	Error         string             `json:"error,omitempty"`
	Skipped       bool               `json:"skipped,omitempty"` // another pass held the Lease
}

// RestartReport is one restart this run carried out (or tried to).
type RestartReport struct {
	Pod      string               `json:"pod"`
	UID      string               `json:"uid"`
	Method   string               `json:"method"`
	Outcome  state.RestartOutcome `json:"outcome"`
	Detail   string               `json:"detail,omitempty"`
	Evidence string               `json:"evidenceBundle,omitempty"` // the bundle saved just before
}

// NotJudged is a listed pod that was not judged.
type NotJudged struct {
	Pod    string `json:"name"`
	UID    string `json:"uid"`
	Reason string `json:"reason"`
}

func (rep *Report) fill(res decide.Result) {
	rep.Verdict, rep.Action, rep.Reason, rep.Paused = res.Verdict, res.Action, res.Reason, res.Pause
	rep.Targets, rep.NotJudged = []decide.Target{}, nil
	for _, t := range res.Targets {
		if t.Judged {
			rep.Targets = append(rep.Targets, t)
		} else {
			rep.NotJudged = append(rep.NotJudged, NotJudged{Pod: t.Pod, UID: t.UID, Reason: t.Reason})
		}
	}
}

// WriteJSON prints the report on one line: the CronJob's log keeps it whole.
func (rep *Report) WriteJSON(w io.Writer) error {
	if rep.Targets == nil {
		rep.Targets = []decide.Target{}
	}
	return json.NewEncoder(w).Encode(rep)
}

// WriteText prints a short table per pod and the decision.
func (rep *Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tVERDICT\tACTION\tREADY\tEXPECTED\tEVIDENCE\tBAD FOR")
	for _, t := range rep.Targets {
		badFor := "-"
		if t.BadSince != nil {
			badFor = decide.ShortDuration(t.BadFor.D())
		}
		termtext.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.Pod, t.Verdict, t.Action, alert.IntOrDash(t.Ready),
			alert.IntOrDash(t.Expected), alert.OrDash(string(t.Evidence)), badFor)
	}
	for _, n := range rep.NotJudged {
		termtext.Fprintf(tw, "%s\t(not judged)\t-\t-\t-\t-\t-\n", n.Pod)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, t := range rep.Targets {
		termtext.Fprintf(w, "\n%s: %s\n", t.Pod, t.Reason)
		if t.Probe != "" {
			termtext.Fprintf(w, "  probe: %s\n", t.Probe)
		}
		for _, g := range t.Gates {
			termtext.Fprintf(w, "  %s %-20s %s\n", map[bool]string{true: "✓", false: "✗"}[g.OK], g.Name, g.Detail)
		}
	}
	for _, n := range rep.NotJudged {
		termtext.Fprintf(w, "\n%s: %s\n", n.Pod, n.Reason)
	}
	fmt.Fprintln(w)
	action := string(rep.Action)
	switch {
	case rep.DryRun && (rep.Action == state.ActionNone || rep.Action == state.ActionWait):
		action += " (dry run: nothing written, deleted, recorded or sent)"
	case rep.DryRun:
		action = "would " + action + " (dry run: nothing written, deleted, recorded or sent)"
	case rep.Shadow && rep.Action == state.ActionRestart:
		action = "would restart (shadow mode: recorded, nothing restarted)"
	}
	termtext.Fprintf(w, "verdict: %s\naction:  %s\nreason:  %s\n", rep.Verdict, action, rep.Reason)
	if rep.Paused != nil {
		termtext.Fprintf(w, "paused:  %s (restarts nothing; judges, records and pages)\n", rep.Paused)
	}
	if rep.ScrapeVia != "" {
		termtext.Fprintf(w, "scrape:  %s\n", rep.ScrapeVia.Describe())
	}
	for _, r := range rep.Restarts {
		termtext.Fprintf(w, "restart: %s %s (%s): %s\n", r.Pod, r.Outcome, r.Method, r.Detail)
	}
	for _, r := range rep.WouldRestarts {
		termtext.Fprintf(w, "shadow:  %s\n", r.Detail)
	}
	for _, a := range rep.Alerts {
		switch {
		case a.DryRun:
			termtext.Fprintf(w, "alert:   would send %s to %s\n", a.Event, a.Sink)
		case a.OK:
			termtext.Fprintf(w, "alert:   sent %s to %s\n", a.Event, a.Sink)
		default:
			termtext.Fprintf(w, "alert:   %s to %s FAILED (%s): %s\n", a.Event, a.Sink, keptWord[a.Kept], a.Error)
		}
	}
	for _, warning := range rep.Warnings {
		termtext.Fprintf(w, "warning: %s\n", warning)
	}
	if rep.Error != "" {
		termtext.Fprintf(w, "error:   %s\n", rep.Error)
	}
	return nil
}

var keptWord = map[bool]string{true: "kept for the next run", false: "not kept"}
