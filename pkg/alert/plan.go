// Package alert decides what to tell people: the events' table (events.go) and the
// plan (plan.go), pure and table-tested. pkg/deliver sends what it plans.
package alert

import (
	"cmp"
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
	Shadow        bool       `json:"shadow,omitempty"` // shadow mode restarts nothing
	Paused        string     `json:"paused,omitempty"` // until when and why the Deployment is paused
	Time          time.Time  `json:"time"`
	Watchdog      string     `json:"watchdogVersion"`
	NextStep      string     `json:"nextStep,omitempty"`
	Closes        []Closed   `json:"closes,omitempty"` // on recovered
	// Labels are the operator's own (--alert-labels), the same on every alert.
	Labels map[string]string `json:"labels,omitempty"`
}

// Closed is one alert a recovered notification closes: receivers that track alerts
// by identity (Alertmanager) resolve exactly these.
type Closed struct {
	Event    string    `json:"event"`
	Pod      string    `json:"pod,omitempty"`
	OpenedAt time.Time `json:"openedAt"`
}

// Sink delivers a notification somewhere people look.
type Sink interface {
	// Name identifies the sink in logs, reports and the outbox; never a URL.
	Name() string
	Send(ctx context.Context, n Notification) error
}

// SinkNames are the sinks' names, in order.
func SinkNames(sinks []Sink) []string {
	var out []string
	for _, s := range sinks {
		out = append(out, s.Name())
	}
	return out
}

// Reacher is a sink whose network path can be checked without sending anything
// (`watchdog doctor`, the chart's `helm test`).
type Reacher interface {
	Reach(ctx context.Context) error
}

// OrDash is s, or "-" when s is empty: a blank field in an alert or a report.
func OrDash(s string) string { return cmp.Or(s, "-") }

// IntOrDash is *p, or "-" when p is nil (not measured).
func IntOrDash(p *int) string {
	if p == nil {
		return "-"
	}
	return strconv.Itoa(*p)
}

// Source is who sends the alerts, the same on every one.
type Source struct {
	Cluster, Namespace, Version string
	Labels                      map[string]string
}

// Stamp writes the source onto n.
func (src Source) Stamp(n *Notification) {
	n.Cluster, n.Namespace, n.Watchdog, n.Labels = src.Cluster, src.Namespace, src.Version, src.Labels
}

// PlanConfig is the alerts' policy.
type PlanConfig struct {
	RealertInterval time.Duration
	BlindAfter      int
	WedgedFor       time.Duration // how long degraded lasts before it is alerted
}

// planning is a plan's policy, who sends its alerts and the run's mode.
type planning struct {
	PlanConfig
	Source Source
	Mode   state.Mode
}

// ActOutcome is what happened to one restart the decision asked for (in shadow
// mode: the would-restart recorded).
type ActOutcome struct {
	Target   decide.Target
	Err      error // the restart failed; nil: it happened (or the pod was already gone)
	Detail   string
	Evidence string // the evidence bundle's key (pkg/evidence), "" when none was saved
}

// Plan compares the run's outcome with the open alerts in s, updates s.Alerts, and returns the notifications
// to send: one per transition, reminders after RealertInterval, recovered once per episode. runErr, a
// failure of the watchdog that did not stop the run, opens watchdog-error.
func Plan(s *state.State, res decide.Result, acts []ActOutcome, runErr error, now time.Time, src Source, mode state.Mode, policy PlanConfig) []Notification {
	cfg := planning{PlanConfig: policy, Source: src, Mode: mode}
	var out []Notification
	if runErr != nil {
		out = append(out, PlanFailure(s, runErr, now, src, mode, policy)...)
	}
	active := activeEvents(res, cfg)
	blind := s.ConsecutiveUnknownRuns >= cfg.BlindAfter && cfg.BlindAfter > 0
	for _, ev := range slices.Sorted(maps.Keys(active)) {
		out = appendOngoing(out, s, ev, active[ev], res, now, cfg)
	}
	if blind {
		out = appendOngoing(out, s, EventBlind, nil, res, now, cfg)
	}
	out = appendActs(out, s, acts, res, now, cfg)

	if res.PauseNotice != "" {
		n := newNotification(EventPauseInvalid, nil, res, now, cfg)
		n.Reason = res.PauseNotice
		out = append(out, n)
	}

	// Close what is no longer observed: everything when the scheduler is healthy
	// again, which sends recovered once; blind alone on any other known verdict.
	// No node listed closes no open episode: it says nothing of whether discovery works again.
	open := slices.ContainsFunc(slices.Collect(maps.Values(s.Pods)), func(p *state.Pod) bool { return p.Episode != nil })
	healthy := (res.Verdict == state.VerdictHealthy || (res.Verdict == state.VerdictNoNodes && !open)) && runErr == nil
	if healthy && len(s.Alerts) > 0 && len(acts) == 0 {
		out = append(out, recovered(s, res, now, cfg))
		s.Alerts = map[string]*state.Alert{}
	} else {
		if runErr == nil && (len(active) > 0 || len(acts) > 0 || blind) {
			// The watchdog works again and this run's own alert says what it sees;
			// otherwise it stays open for the next healthy run's recovered.
			delete(s.Alerts, EventWatchdogError)
		}
		if !blind && res.Verdict != state.VerdictUnknown {
			delete(s.Alerts, EventBlind)
		}
	}
	for i := range out {
		if res.Pause != nil {
			out[i].Paused = res.Pause.String()
		}
	}
	return out
}

// activeEvents are the ongoing events the judged pods open, each for the pod bad
// the longest.
func activeEvents(res decide.Result, cfg planning) map[string]*decide.Target {
	active := map[string]*decide.Target{}
	for i := range res.Targets {
		t := &res.Targets[i]
		for ev, opens := range map[string]bool{
			EventWedged:           t.Verdict == state.VerdictWedged && !t.NodesUnreachable,
			EventNodesUnreachable: t.NodesUnreachable,
			EventDegraded:         t.Verdict == state.VerdictDegraded && t.BadFor.D() >= cfg.WedgedFor,
			// A restart done or under way (a claim race lost, a replacement starting)
			// is not blocked, nor one held by the back-off alone (restart-ineffective).
			EventRestartBlocked:     t.Action == state.ActionBlocked && !t.RestartInProgress() && !t.OnlyBackoff(),
			EventRestartIneffective: t.Ineffective != "",
		} {
			if cur, ok := active[ev]; opens && t.Judged && (!ok || t.BadFor > cur.BadFor) {
				active[ev] = t
			}
		}
	}
	return active
}

// appendActs says how every restart attempt went.
func appendActs(out []Notification, s *state.State, acts []ActOutcome, res decide.Result, now time.Time, cfg planning) []Notification {
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
		s.Alerts[ev] = &state.Alert{Event: ev, OpenedAt: now, Pod: t.Pod}
	}
	return out
}

// recovered closes every open alert of s, sent once per episode.
func recovered(s *state.State, res decide.Result, now time.Time, cfg planning) Notification {
	// Only the watchdog's own events are closed, by name from its table.
	opened := slices.DeleteFunc(slices.Sorted(maps.Keys(s.Alerts)), func(ev string) bool { _, ok := Lookup(ev); return !ok })
	var first time.Time
	closes := make([]Closed, 0, len(opened))
	for _, ev := range opened {
		a := s.Alerts[ev]
		closes = append(closes, Closed{Event: ev, Pod: a.Pod, OpenedAt: a.OpenedAt.UTC()})
		if first.IsZero() || a.OpenedAt.Before(first) {
			first = a.OpenedAt
		}
	}
	var judged *decide.Target
	if i := slices.IndexFunc(res.Targets, func(t decide.Target) bool { return t.Judged }); i >= 0 {
		judged = &res.Targets[i]
	}
	n := newNotification(EventRecovered, judged, res, now, cfg)
	n.Reason = fmt.Sprintf("%s; was %s since %s", res.Reason, strings.Join(opened, ", "), first.UTC().Format(time.RFC3339))
	n.Since, n.Closes = &first, closes
	return n
}

// PlanFailure plans watchdog-error for a failed run: once, then reminders (through s; an empty s always sends).
func PlanFailure(s *state.State, err error, now time.Time, src Source, mode state.Mode, policy PlanConfig) []Notification {
	res := decide.Result{Verdict: state.VerdictUnknown, Action: state.ActionNone, Reason: "the watchdog cannot do its job: " + err.Error()}
	return appendOngoing(nil, s, EventWatchdogError, nil, res, now, planning{PlanConfig: policy, Source: src, Mode: mode})
}

func appendOngoing(out []Notification, s *state.State, ev string, t *decide.Target, res decide.Result, now time.Time, cfg planning) []Notification {
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
		n.Verdict = string(state.VerdictUnknown)
	}
	if ev == EventRestartIneffective && t != nil {
		n.Reason = t.Ineffective + "; " + decide.GateSummary(*t)
	}
	if t != nil {
		a.Pod = t.Pod
	}
	// Sent when planned: a failed delivery is retried from the outbox, not re-planned.
	a.Sends++
	a.LastSentAt = &now
	return append(out, n)
}

func newNotification(ev string, t *decide.Target, res decide.Result, now time.Time, cfg planning) Notification {
	n := Notification{
		SchemaVersion: SchemaVersion,
		Event:         ev,
		Severity:      Spec(ev).Severity,
		NextStep:      Spec(ev).NextStep,
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
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s|%s|%s|%d", ev, n.UID, cfg.Source.Namespace, now.UnixNano())))
	n.ID = hex.EncodeToString(sum[:8])
	return n
}
