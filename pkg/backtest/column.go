package backtest

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"k8s.io/utils/ptr"

	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/scrape"
	"github.com/agentenv/watchdog/pkg/state"
)

// column is the World with one actor's restarts. History cannot tell what a
// restarted scheduler would have done, so a replacement (pod~1, pod~2, ...) reads
// as many ready nodes as serve until the recorded pod heals by itself, then the
// record; it is a new pod to the decision core, as live: a later wedge is its own.
type column struct {
	*World
	// lines are each target's restarts in the order made: the column at t is the
	// latest made by t, the same during the replay and when measured after it.
	lines    map[*Target][]*line
	restarts []time.Time
}

// line is a restart of a target. healAt is when the record heals by itself (zero:
// not within the range); ended: by ending, after which nothing of it is listed.
type line struct {
	deletedAt, healAt time.Time
	ended             bool
}

func (w *World) column() *column { return &column{World: w, lines: map[*Target][]*line{}} }

// Pod is a column's scheduler pod as the observer lists it, with its readings.
type Pod struct {
	decide.Pod
	Target                         *Target
	ReadyNodes, Rejected, Accepted float64
}

// Pods lists the column's pods at t: the record's readings, or a replacement's.
func (c *column) Pods(t time.Time) []Pod {
	var out []Pod
	for _, tg := range c.Targets {
		if t.Before(tg.first()) || t.Sub(tg.last()) > tg.maxAge {
			continue
		}
		l, n := c.lineAt(tg, t)
		healed := l != nil && !l.healAt.IsZero() && !t.Before(l.healAt)
		if healed && l.ended {
			continue
		}
		p := Pod{Target: tg, Pod: decide.Pod{Name: tg.Pod, UID: tg.UID, Phase: "Running", Ready: true, Running: true, StartedAt: c.startedAt(tg, t),
			ControllerKind: "ReplicaSet", ControllerName: replicaSetOf(tg.Pod), ControllerUID: replicaSetUID,
			Terminating: !tg.terminating.IsZero() && !t.Before(tg.terminating)}}
		ready, when, ok := at(tg.Ready, t, tg.maxAge)
		switch {
		case !ok:
			p.ScrapeErr = &scrape.Error{Kind: scrape.KindAbsent, Err: errors.New(gapReason("the ready series", when, t, tg.maxAge))}
		case slices.ContainsFunc(tg.disagree, func(s [2]time.Time) bool { return !t.Before(s[0]) && !t.After(s[1]) }):
			p.ScrapeErr = &scrape.Error{Kind: scrape.KindInvalid, Err: errors.New("the pod's series disagree on the ready count here (the report's warnings name them)")}
		case l != nil && !healed:
			// In a gap of kube-state-metrics' series alone, the last count known.
			if v, _, ok := at(c.Expected, t, math.MaxInt64); ok && v > 0 {
				p.ReadyNodes = math.Round(v)
			}
		default:
			p.ReadyNodes = ready
			// A counter is absent until its first increment: 0. In a gap of the counter
			// alone, its last value of this process stands (no rise).
			if v, seen, ok := at(tg.Rejected, t, math.MaxInt64); ok && !seen.Before(p.StartedAt) {
				p.Rejected = v
			}
			if v, seen, ok := at(tg.Accepted, t, math.MaxInt64); ok && !seen.Before(p.StartedAt) {
				p.Accepted = v
			}
		}
		if l != nil {
			// The replacement, started 5 s after the delete (whole seconds), reads the record once it heals.
			p.Name, p.UID = fmt.Sprintf("%s~%d", p.Name, n), fmt.Sprintf("%s~%d", p.UID, n)
			if started := l.deletedAt.Add(5 * time.Second).Truncate(time.Second); !healed || p.StartedAt.Before(started) {
				p.StartedAt = started
			}
		}
		out = append(out, p)
	}
	return out
}

// Restart applies a restart of the pod uid at t; false for a pod not listed (gone).
func (c *column) Restart(uid string, t time.Time) bool {
	for _, p := range c.Pods(t) {
		if p.UID != uid {
			continue
		}
		c.restarts = append(c.restarts, t)
		l := &line{deletedAt: t}
		if prev, _ := c.lineAt(p.Target, t); c.ha && c.condition(t) == state.VerdictHealthy {
			l.healAt = t // a standby's replacement is a standby: it reads the record
		} else if prev != nil && (prev.healAt.IsZero() || t.Before(prev.healAt)) {
			// A replacement restarted before the record healed: it heals as then.
			l.healAt, l.ended = prev.healAt, prev.ended
		} else {
			l.healAt, l.ended = c.healsAt(p.Target, t)
		}
		c.lines[p.Target] = append(c.lines[p.Target], l)
		return true
	}
	return false
}

// lineAt is the target's latest restart by t and its number n (pod~n), or nil.
func (c *column) lineAt(tg *Target, t time.Time) (*line, int) {
	lines := c.lines[tg]
	for i := len(lines) - 1; i >= 0; i-- {
		if !t.Before(lines[i].deletedAt) {
			return lines[i], i + 1
		}
	}
	return nil, 0
}

// condition is the column's scheduler at t as an outside observer would call it,
// by the pods a run judges: wedged when one past the startup grace reads 0 ready
// while nodes serve (HA without --leader-lease: while none counts nodes); else
// unknown when the data cannot tell; else healthy.
func (c *column) condition(t time.Time) state.Verdict {
	if n, ok := c.serving(t); !ok {
		return state.VerdictUnknown
	} else if n == 0 {
		return state.VerdictHealthy
	}
	pods := c.Pods(t)
	obs := c.observe(t, pods)
	if obs.Leader != nil && obs.Leader.Err != nil {
		return state.VerdictUnknown
	}
	judged, _, _ := decide.Judged(obs, c.judge)
	v, zero, counting := state.VerdictHealthy, false, false
	for _, p := range pods {
		switch {
		case !slices.ContainsFunc(judged, func(j decide.Pod) bool { return j.UID == p.UID }):
			// Not judged: its readings say nothing of the scheduler that serves.
		case p.ScrapeErr != nil:
			v = state.VerdictUnknown
		case p.ReadyNodes > 0:
			counting = true
		case t.Sub(p.StartedAt) >= c.grace:
			zero = true
		}
	}
	if zero && !(c.ha && counting) {
		return state.VerdictWedged
	}
	return v
}

// observation is the column at t as the observer reports it (observe: of pods).
func (c *column) observation(t time.Time) decide.Observation { return c.observe(t, c.Pods(t)) }

func (c *column) observe(t time.Time, pods []Pod) decide.Observation {
	obs := decide.Observation{At: t}
	expected, known := c.serving(t)
	obs.Expected.Serving = expected
	for _, p := range pods {
		switch {
		case p.ScrapeErr != nil: // a gap in its own series
		case !known:
			p.ScrapeErr = &scrape.Error{Kind: scrape.KindAbsent, Err: errors.New(gapReason("the serving-node count (--expected-query)", time.Time{}, t, c.Step))}
		default:
			p.Sample = &scrape.Sample{Observed: map[string]int{"ready": int(math.Round(p.ReadyNodes))}, HeartbeatRejected: uint64(max(p.Rejected, 0)), HeartbeatOK: uint64(max(p.Accepted, 0))}
		}
		obs.Pods = append(obs.Pods, p.Pod)
	}
	obs.Ownership = &decide.Ownership{Deployment: c.deployment, Found: true, Chains: assumedChains(c.deployment, obs.Pods)}
	if c.leaderFromReadiness {
		holder, err := c.leader(t, pods)
		// No renewal time: readiness within its staleness is the leadership.
		obs.Leader = &decide.Leader{Holder: holder, Err: err}
	}
	return obs
}

// The ways a wedge ends (Wedge.HealedBy).
const (
	healedRestart = "restart"
	healedOutside = "restarted outside the watchdog"
	healedItself  = "itself"
)

// summary measures the column at the data's resolution: time wedged and unknown,
// and the wedges; a gap inside a wedge is unknown, neither its end nor a start.
func (c *column) summary() WorldSummary {
	s := WorldSummary{Restarts: len(c.restarts), Wedges: []Wedge{}}
	step := c.interval
	var open *Wedge
	for t := c.From; !t.After(c.To); t = t.Add(step) {
		switch c.condition(t) {
		case state.VerdictWedged:
			if open == nil {
				s.Wedges = append(s.Wedges, Wedge{From: t.UTC()})
				open = &s.Wedges[len(s.Wedges)-1]
			}
			s.Wedged += state.Duration(step)
		case state.VerdictUnknown:
			s.Unknown += state.Duration(step)
			if open != nil {
				open.Unknown += state.Duration(step)
			}
		case state.VerdictHealthy:
			if open != nil {
				open.To, open.Duration = ptr.To(t.UTC()), state.Duration(t.Sub(open.From))
				open.HealedBy, open = c.healedBy(open.From, t), nil
			}
		}
	}
	if open != nil {
		open.Duration, open.HealedBy = state.Duration(c.To.Sub(open.From)), "still wedged at the end"
	}
	for _, wg := range s.Wedges {
		s.WorstWedge = max(s.WorstWedge, wg.Duration)
	}
	return s
}

// healedBy says what ended a wedge [from, to].
func (c *column) healedBy(from, to time.Time) string {
	in := func(at time.Time) bool { return !at.Before(from) && !at.After(to) }
	if slices.ContainsFunc(c.restarts, in) {
		return healedRestart
	}
	if slices.ContainsFunc(c.Targets, func(tg *Target) bool { return tg.outside && in(tg.terminating) }) {
		return healedOutside
	}
	return healedItself
}
