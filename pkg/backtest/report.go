package backtest

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/state"
	"github.com/agentenv/watchdog/pkg/termtext"
)

// Result is what a backtest found; its JSON form is `watchdog backtest -o json`.
type Result struct {
	Prometheus     string         `json:"prometheus,omitempty"`
	From           time.Time      `json:"from"`
	To             time.Time      `json:"to"`
	Mode           string         `json:"mode"`
	Runs           int            `json:"runs"`
	ScrapeInterval state.Duration `json:"scrapeInterval"`
	Step           state.Duration `json:"step"`
	Pods           []string       `json:"pods"`
	// Assumed is what the history cannot show and the replay takes as passing.
	Assumed  []string  `json:"assumed"`
	Warnings []string  `json:"warnings,omitempty"`
	Episodes []Episode `json:"episodes"`
	Restarts []Restart `json:"restarts"`
	Blocked  []Blocked `json:"blocked"`
	// Pages are every alert the watchdog would have sent (critical ones page).
	Pages   []Page  `json:"pages"`
	Summary Summary `json:"summary"`
	// StopGap is the stop-gap script on the same data; AsRecorded, nobody restarting.
	StopGap    StopGap      `json:"stopGap"`
	AsRecorded WorldSummary `json:"asRecorded"`
}

// Episode is a bad episode as the decision core kept it.
type Episode struct {
	Pod      string               `json:"pod"`
	UID      string               `json:"uid"`
	Kind     state.Verdict        `json:"kind"`
	Evidence state.Evidence       `json:"evidence,omitempty"`
	From     time.Time            `json:"from"`
	To       *time.Time           `json:"to,omitempty"`
	Duration state.Duration       `json:"duration,omitempty"`
	Outcome  state.EpisodeOutcome `json:"outcome"`
}

// episodeOpen is the outcome of an episode still open when the history ends.
const episodeOpen state.EpisodeOutcome = "still open at the end"

// Restart is a restart the watchdog would have made.
type Restart struct {
	Pod               string         `json:"pod"`
	UID               string         `json:"uid"`
	At                time.Time      `json:"at"`
	Run               time.Time      `json:"run"` // the pass's start
	Evidence          string         `json:"evidence"`
	Reason            string         `json:"reason"`
	Gates             string         `json:"gates"`
	EpisodeStart      *time.Time     `json:"episodeStart,omitempty"`
	AfterEpisodeStart state.Duration `json:"afterEpisodeStart"`
}

// Blocked is a restart that was due and refused by a gate.
type Blocked struct {
	Pod    string        `json:"pod"`
	At     time.Time     `json:"at"`
	Run    time.Time     `json:"run"`
	Gates  []decide.Gate `json:"gates"`
	Reason string        `json:"reason"`
}

// Page is one alert the watchdog would have sent.
type Page struct {
	At       time.Time `json:"at"`
	Run      time.Time `json:"run"` // the pass's start
	Event    string    `json:"event"`
	Severity string    `json:"severity"`
	Pod      string    `json:"pod,omitempty"`
	Reminder bool      `json:"reminder,omitempty"`
	Reason   string    `json:"reason"`
}

// Summary counts what the watchdog would have done.
type Summary struct {
	Runs    int `json:"runs"`
	Pages   int `json:"pages"` // critical alerts
	Alerts  int `json:"alerts"`
	Blocked int `json:"blocked"`
	WorldSummary
}

// WorldSummary measures a column (docs/backtest.md, "What it prints").
type WorldSummary struct {
	Restarts   int            `json:"restarts"`
	Wedged     state.Duration `json:"wedged"`
	Unknown    state.Duration `json:"unknown"`
	WorstWedge state.Duration `json:"worstTimeToHeal"`
	Wedges     []Wedge        `json:"wedges"`
}

// Wedge is one stretch of wedged readings; a gap inside is Unknown, never a heal.
type Wedge struct {
	From     time.Time      `json:"from"`
	To       *time.Time     `json:"to,omitempty"`
	Duration state.Duration `json:"duration"`
	Unknown  state.Duration `json:"unknown,omitempty"`
	HealedBy string         `json:"healedBy"`
}

// StopGap is the stop-gap script's column.
type StopGap struct {
	After    state.Duration   `json:"after"` // --stop-gap-after
	Restarts []StopGapRestart `json:"restarts"`
	Summary  WorldSummary     `json:"summary"`
}

// StopGapRestart is one restart of the stop-gap script.
type StopGapRestart struct {
	At        time.Time `json:"at"`
	Pod       string    `json:"pod"`
	ZeroSince time.Time `json:"zeroSince"`
}

// WriteText prints the result for people: what happened, then the comparison.
func (r *Result) WriteText(w io.Writer) error {
	ts := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	short := func(d state.Duration) string { return decide.ShortDuration(d.D()) }
	termtext.Fprintf(w, "backtest %s → %s (%s), %s: %d runs\n", ts(r.From), ts(r.To), decide.ShortDuration(r.To.Sub(r.From)), r.Mode, r.Runs)
	termtext.Fprintf(w, "data: scheduler pods %s; scraped every %s; serving nodes every %s; unknown (no data, or data that cannot tell) %s, %.0f%% of the range\n",
		strings.Join(r.Pods, ", "), short(r.ScrapeInterval), short(r.Step), short(r.AsRecorded.Unknown), 100*r.AsRecorded.Unknown.D().Seconds()/max(r.To.Sub(r.From).Seconds(), 1))
	for _, a := range r.Assumed {
		termtext.Fprintf(w, "assumed (not in the history, taken as passing): %s\n", a)
	}
	for _, warning := range r.Warnings {
		termtext.Fprintf(w, "warning: %s\n", warning)
	}

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	section := func(title string, n int, header string) {
		termtext.Fprintf(tw, "\n%s (%d)\n", title, n)
		if n > 0 {
			fmt.Fprintln(tw, header)
		}
	}
	section("EPISODES", len(r.Episodes), "FROM\tTO\tFOR\tPOD\tKIND\tEVIDENCE\tOUTCOME")
	for _, e := range r.Episodes {
		to, dur := "-", "-"
		if e.To != nil {
			to, dur = ts(*e.To), short(e.Duration)
		}
		termtext.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", ts(e.From), to, dur, e.Pod, e.Kind, alert.OrDash(string(e.Evidence)), e.Outcome)
	}
	section("RESTARTS the watchdog would have made", len(r.Restarts), "AT\tPOD\tEVIDENCE\tAFTER EPISODE START\tWHY")
	for _, x := range r.Restarts {
		termtext.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", ts(x.At), x.Pod, alert.OrDash(x.Evidence), short(x.AfterEpisodeStart), x.Gates)
	}
	section("BLOCKED restarts", len(r.Blocked), "AT\tPOD\tGATE\tDETAIL")
	for _, b := range r.Blocked {
		for _, g := range b.Gates {
			termtext.Fprintf(tw, "%s\t%s\t%s\t%s\n", ts(b.At), b.Pod, g.Name, g.Detail)
		}
	}
	section("ALERTS the watchdog would have sent", len(r.Pages), "AT\tEVENT\tSEVERITY\tPOD")
	for _, p := range r.Pages {
		ev := p.Event
		if p.Reminder {
			ev += " (reminder)"
		}
		termtext.Fprintf(tw, "%s\t%s\t%s\t%s\n", ts(p.At), ev, p.Severity, alert.OrDash(p.Pod))
	}
	section(fmt.Sprintf("STOP-GAP restarts (ready 0 on runs %s apart, no other check)", short(r.StopGap.After)),
		len(r.StopGap.Restarts), "AT\tPOD\tREADY 0 SINCE")
	for _, x := range r.StopGap.Restarts {
		termtext.Fprintf(tw, "%s\t%s\t%s\n", ts(x.At), x.Pod, ts(x.ZeroSince))
	}

	termtext.Fprintf(tw, "\nSUMMARY\tWATCHDOG\tSTOP-GAP\tAS RECORDED\n")
	termtext.Fprintf(tw, "restarts\t%d\t%d\t-\n", r.Summary.Restarts, r.StopGap.Summary.Restarts)
	termtext.Fprintf(tw, "pages (critical)\t%d\t-\t-\n", r.Summary.Pages)
	termtext.Fprintf(tw, "alerts (all)\t%d\t-\t-\n", r.Summary.Alerts)
	termtext.Fprintf(tw, "blocked restarts\t%d\t-\t-\n", r.Summary.Blocked)
	termtext.Fprintf(tw, "time wedged\t%s\t%s\t%s\n", short(r.Summary.Wedged), short(r.StopGap.Summary.Wedged), short(r.AsRecorded.Wedged))
	termtext.Fprintf(tw, "time unknown\t%s\t%s\t%s\n", short(r.Summary.Unknown), short(r.StopGap.Summary.Unknown), short(r.AsRecorded.Unknown))
	termtext.Fprintf(tw, "wedges\t%s\t%s\t%s\n", wedgeCounts(r.Summary.WorldSummary), wedgeCounts(r.StopGap.Summary), wedgeCounts(r.AsRecorded))
	termtext.Fprintf(tw, "worst time to heal\t%s\t%s\t%s\n", short(r.Summary.WorstWedge), short(r.StopGap.Summary.WorstWedge), short(r.AsRecorded.WorstWedge))
	termtext.Fprintf(tw, "unknown inside wedges\t%s\t%s\t%s\n", short(unknownIn(r.Summary.WorldSummary)), short(unknownIn(r.StopGap.Summary)), short(unknownIn(r.AsRecorded)))
	return tw.Flush()
}

// wedgeCounts is "3 (2 by restart, 1 outside)".
func wedgeCounts(s WorldSummary) string {
	by := map[string]int{}
	for _, w := range s.Wedges {
		by[w.HealedBy]++
	}
	return fmt.Sprintf("%d (%d by restart, %d outside)", len(s.Wedges), by[healedRestart], by[healedOutside])
}

// unknownIn is the time inside wedges the data does not cover.
func unknownIn(s WorldSummary) state.Duration {
	var d state.Duration
	for _, w := range s.Wedges {
		d += w.Unknown
	}
	return d
}
