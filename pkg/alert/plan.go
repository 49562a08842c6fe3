// Package alert decides what to tell people: the events' table (events.go) and the
// plan (plan.go), pure and table-tested. pkg/deliver sends what it plans.
package alert

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/state"
)

// SchemaVersion versions the generic webhook payload (docs/alerts.md).
const SchemaVersion = 1

// Notification is one alert, in the generic webhook schema. It never holds secrets.
type Notification struct {
	SchemaVersion int        `json:"schemaVersion"`
	ID            string     `json:"id"`
	Event         string     `json:"event"`
	Severity      string     `json:"severity"`
	Reminder      bool       `json:"reminder,omitempty"`
	Test          bool       `json:"test,omitempty"`
	Cluster       string     `json:"cluster"`
	Namespace     string     `json:"namespace"`
	Pod           string     `json:"pod,omitempty"`
	UID           string     `json:"uid,omitempty"`
	Verdict       string     `json:"verdict,omitempty"`
	Reason        string     `json:"reason"`
	Evidence      string     `json:"evidence,omitempty"`
	Ready         *int       `json:"ready"`
	Expected      *int       `json:"expected"`
	Since         *time.Time `json:"since,omitempty"`
	Action        string     `json:"action"`
	DryRun        bool       `json:"dryRun"`
	// Shadow: sent by a watchdog in shadow mode, which restarts nothing.
	Shadow bool `json:"shadow,omitempty"`
	// Paused says, while the scheduler Deployment is paused, until when and why:
	// the watchdog restarts nothing meanwhile.
	Paused   string    `json:"paused,omitempty"`
	Time     time.Time `json:"time"`
	Watchdog string    `json:"watchdogVersion"`
	// NextStep tells a human what to do; rendered in Slack, included for webhooks.
	NextStep string `json:"nextStep,omitempty"`
	// Closes lists, on recovered, the alerts it closes (Closed).
	Closes []Closed `json:"closes,omitempty"`
	// Labels are the operator's own (--alert-labels: team routing), the same on
	// every alert: Alertmanager labels, the webhook's labels, a line in Slack.
	Labels map[string]string `json:"labels,omitempty"`
}

// Closed is one alert a recovered notification closes: receivers that track alerts
// by identity (Alertmanager) resolve exactly these.
type Closed struct {
	Event    string    `json:"event"`
	Pod      string    `json:"pod,omitempty"`
	OpenedAt time.Time `json:"openedAt"`
}

// closedAlerts lists the open alerts in event order.
func closedAlerts(open map[string]*state.Alert) []Closed {
	out := make([]Closed, 0, len(open))
	for _, ev := range slices.Sorted(maps.Keys(open)) {
		if a := open[ev]; a != nil {
			out = append(out, Closed{Event: ev, Pod: a.Pod, OpenedAt: a.OpenedAt.UTC()})
		}
	}
	return out
}

// Sink delivers a notification somewhere people look.
type Sink interface {
	// Name identifies the sink in logs, reports and the outbox; never a URL.
	Name() string
	Send(ctx context.Context, n Notification) error
}

// Reacher is a sink whose network path can be checked without sending anything
// (`watchdog doctor`, the chart's `helm test`).
type Reacher interface {
	Reach(ctx context.Context) error
}

// OrDash is s, or "-" when s is empty: a blank field in an alert or a report.
func OrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// IntOrDash is *p, or "-" when p is nil (not measured).
func IntOrDash(p *int) string {
	if p == nil {
		return "-"
	}
	return strconv.Itoa(*p)
}

// Source is who sends the alerts, the same on every one: the watchdog's cluster
// (--cluster-name), namespace and version, and the operator's --alert-labels.
type Source struct {
	Cluster, Namespace, Version string
	Labels                      map[string]string
}

// Stamp writes the source onto n.
func (src Source) Stamp(n *Notification) {
	n.Cluster, n.Namespace, n.Watchdog, n.Labels = src.Cluster, src.Namespace, src.Version, src.Labels
}

// PlanConfig holds what the plan needs beyond the decision.
type PlanConfig struct {
	RealertInterval time.Duration
	BlindAfter      int
	// WedgedFor is how long degraded must last before it is alerted.
	WedgedFor time.Duration
	Source    Source
	// Mode marks every notification as a dry run's or shadow mode's.
	Mode state.Mode
}

// ActOutcome is what happened to one restart the decision asked for (in shadow mode: the would-restart recorded).
type ActOutcome struct {
	Target decide.Target
	// Done: the restart happened (or the pod was already gone). Err: it failed.
	Done   bool
	Err    error
	Detail string
	// Evidence is the key of the evidence bundle saved just before (pkg/evidence),
	// "" when none was: the alert says how to read it.
	Evidence string
}

// Plan compares the run's outcome with the open alerts in s, updates s.Alerts, and
// returns the notifications to send: one per transition, reminders for problems
// still observed after RealertInterval, and recovered once per episode.
//
// runErr is a failure of the watchdog itself that did not stop the run (an API
// read refused, say): it opens watchdog-error, which closes with the recovered of
// the next clean healthy run, or silently on a clean run that raises or keeps an
// alert of its own.
func Plan(s *state.State, res decide.Result, acts []ActOutcome, runErr error, now time.Time, cfg PlanConfig) []Notification {
	var out []Notification
	if runErr != nil {
		out = append(out, PlanFailure(s, runErr, now, cfg)...)
	}
	active := map[string]*decide.Target{}
	for i := range res.Targets {
		t := &res.Targets[i]
		if !t.Judged {
			continue
		}
		switch {
		case t.Verdict == decide.VerdictWedged:
			keepWorst(active, EventWedged, t)
		case t.Verdict == decide.VerdictDegraded && t.BadFor.D() >= cfg.WedgedFor:
			keepWorst(active, EventDegraded, t)
		}
		// A restart already done or under way is not a blocked restart (the loser
		// of a claim race, a replacement still starting): no page. Nor is one held
		// back by the back-off alone: restart-ineffective says why.
		if t.Action == decide.ActionBlocked && !t.RestartInProgress() && !t.OnlyBackoff() {
			keepWorst(active, EventRestartBlocked, t)
		}
		if t.Ineffective != "" {
			keepWorst(active, EventRestartIneffective, t)
		}
	}
	blind := s.ConsecutiveUnknownRuns >= cfg.BlindAfter && cfg.BlindAfter > 0

	// Open problems: new ones alert now, old ones remind after the interval.
	for _, ev := range slices.Sorted(maps.Keys(active)) {
		out = appendOngoing(out, s, ev, active[ev], res, now, cfg)
	}
	if blind {
		out = appendOngoing(out, s, EventBlind, nil, res, now, cfg)
	}

	// One-shots: every restart attempt says how it went.
	for _, a := range acts {
		t := a.Target
		ev, reason := EventRestarted, a.Detail
		switch {
		case cfg.Mode == state.ModeShadow:
			ev = EventWouldRestart
		case a.Err != nil:
			ev, reason = EventRestartFailed, a.Err.Error()
		}
		n := newNotification(ev, &t, res, now, cfg)
		n.Reason = reason + " (" + t.Reason + ")"
		if a.Evidence != "" {
			n.Reason += fmt.Sprintf("; evidence (its log, metrics, status): watchdog history -n %s --evidence %s", cfg.Source.Namespace, a.Evidence)
		}
		out = append(out, n)
		s.Alerts[ev] = &state.Alert{Event: ev, OpenedAt: now, Pod: t.Pod, Reason: state.Truncate(n.Reason, 300)}
	}

	// Close what is no longer observed: everything when the scheduler is healthy
	// again, which sends recovered once; blind alone on any other known verdict.
	healthy := (res.Verdict == decide.VerdictHealthy || (res.Verdict == decide.VerdictNoNodes && !openEpisode(s))) && runErr == nil
	if healthy && len(s.Alerts) > 0 && len(acts) == 0 {
		opened := slices.Sorted(maps.Keys(s.Alerts))
		var first time.Time
		for _, a := range s.Alerts {
			if first.IsZero() || a.OpenedAt.Before(first) {
				first = a.OpenedAt
			}
		}
		n := newNotification(EventRecovered, firstJudged(res), res, now, cfg)
		n.Reason = fmt.Sprintf("%s; was %s since %s", res.Reason, strings.Join(opened, ", "), first.UTC().Format(time.RFC3339))
		n.Since = &first
		n.Closes = closedAlerts(s.Alerts)
		out = append(out, n)
		s.Alerts = map[string]*state.Alert{}
	} else {
		if runErr == nil && (len(active) > 0 || len(acts) > 0 || blind) {
			// The watchdog works again and this run's own alert says what it
			// sees. Otherwise (unknown, starting) it stays open, so that the
			// recovered of the next healthy run closes it.
			delete(s.Alerts, EventWatchdogError)
		}
		if !blind && res.Verdict != decide.VerdictUnknown {
			delete(s.Alerts, EventBlind)
		}
	}
	return markPaused(out, res.Pause)
}

// markPaused says on every alert of a run that the scheduler is paused.
func markPaused(out []Notification, p *decide.Pause) []Notification {
	if p == nil {
		return out
	}
	for i := range out {
		out[i].Paused = p.String()
	}
	return out
}

// PlanFailure plans watchdog-error for a run that failed: once, then a reminder
// every RealertInterval while failures go on (deduplicated through s when the
// state could be read; with an empty state it is always sent).
func PlanFailure(s *state.State, err error, now time.Time, cfg PlanConfig) []Notification {
	res := decide.Result{Verdict: decide.VerdictUnknown, Action: decide.ActionNone, Reason: "the watchdog cannot do its job: " + err.Error()}
	return appendOngoing(nil, s, EventWatchdogError, nil, res, now, cfg)
}

func keepWorst(active map[string]*decide.Target, ev string, t *decide.Target) {
	if cur, ok := active[ev]; !ok || t.BadFor > cur.BadFor {
		active[ev] = t
	}
}

func appendOngoing(out []Notification, s *state.State, ev string, t *decide.Target, res decide.Result, now time.Time, cfg PlanConfig) []Notification {
	a, open := s.Alerts[ev]
	switch {
	case !open:
		a = &state.Alert{Event: ev, OpenedAt: now}
		s.Alerts[ev] = a
	case a.LastSentAt != nil && now.Sub(*a.LastSentAt) < cfg.RealertInterval:
		return out
	}
	n := newNotification(ev, t, res, now, cfg)
	n.Reminder = open && a.Sends > 0
	if ev == EventBlind {
		n.Reason = fmt.Sprintf("verdict unknown in %d runs since the scheduler was last seen fine: %s", s.ConsecutiveUnknownRuns, res.Reason)
		n.Verdict = string(decide.VerdictUnknown)
	}
	if ev == EventRestartIneffective && t != nil {
		n.Reason = t.Ineffective + "; " + decide.GateSummary(*t)
	}
	if t != nil {
		a.Pod = t.Pod
	}
	a.Reason = state.Truncate(n.Reason, 300)
	// Marked as sent when planned; a failed delivery keeps the alert in the outbox,
	// so it is retried, not re-planned.
	a.Sends++
	sent := now
	a.LastSentAt = &sent
	return append(out, n)
}

func firstJudged(res decide.Result) *decide.Target {
	for i := range res.Targets {
		if res.Targets[i].Judged {
			return &res.Targets[i]
		}
	}
	return nil
}

func newNotification(ev string, t *decide.Target, res decide.Result, now time.Time, cfg PlanConfig) Notification {
	n := Notification{
		SchemaVersion: SchemaVersion,
		Event:         ev,
		Severity:      Spec(ev).Severity,
		Verdict:       string(res.Verdict),
		Reason:        res.Reason,
		Action:        string(res.Action),
		DryRun:        cfg.Mode == state.ModeDryRun,
		Shadow:        cfg.Mode == state.ModeShadow,
		Time:          now.UTC(),
	}
	cfg.Source.Stamp(&n)
	if t != nil {
		n.Pod, n.UID, n.Verdict, n.Reason, n.Action = t.Pod, t.UID, string(t.Verdict), t.Reason, string(t.Action)
		n.Ready, n.Expected, n.Since, n.Evidence = t.Ready, t.Expected, t.BadSince, string(t.Evidence)
		if len(t.Gates) > 0 {
			n.Reason += "; " + decide.GateSummary(*t)
		}
	}
	n.NextStep = Spec(ev).NextStep
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s|%s|%s|%d", ev, n.UID, cfg.Source.Namespace, now.UnixNano())))
	n.ID = hex.EncodeToString(sum[:8])
	return n
}

// openEpisode reports a pod whose bad episode is still open: no node listed (the
// nodes scaled to zero) then closes nothing, since it says nothing about whether
// discovery works again.
func openEpisode(s *state.State) bool {
	for _, p := range s.Pods {
		if p.Episode != nil {
			return true
		}
	}
	return false
}
