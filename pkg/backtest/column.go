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

// column is the World with one actor's restarts applied: the simulated
// watchdog's, the stop-gap's, or nobody's (as recorded). History cannot tell what
// a restarted scheduler would have done, so a replacement (pod~1, pod~2, ...)
// reads as many ready nodes as serve until the recorded pod heals by itself, then
// the record. It stays a new pod (its own name and UID) to the decision core, as
// live: a later wedge is its own.
type column struct {
	*World
	// lines are, by target, the restarts of each in the order made: the column at
	// any time is the latest made by then, so that it reads the same during the
	// replay and when measured after it.
	lines    map[*Target][]*line
	restarts []time.Time
	// chosen caches decide.Judged by the listing: it changes rarely, the
	// readings at every step.
	chosen struct {
		key    string
		judged map[string]bool
		buf    []byte // the key being built, reused
	}
}

// line is a target the actor restarted.
type line struct {
	deletedAt time.Time
	// healAt is when the record heals by itself (zero: not within the range);
	// ended: by ending, after which neither it nor a replacement is listed.
	healAt time.Time
	ended  bool
	// n numbers the replacement (its name and UID are the pod's ~n, so that no
	// two share one); startedAt is its start.
	n         int
	startedAt time.Time
}

func (w *World) column() *column { return &column{World: w, lines: map[*Target][]*line{}} }

// Pod is one scheduler pod of a column at a given time, as the watchdog's
// observer lists it (Terminating: a newer pod of its Deployment replaced it),
// with its readings or, in a gap, ScrapeErr.
type Pod struct {
	decide.Pod
	Target                         *Target
	ReadyNodes, Rejected, Accepted float64
}

// Pods lists the column's scheduler pods at t with their readings.
func (c *column) Pods(t time.Time) []Pod {
	var out []Pod
	for _, tg := range c.Targets {
		if t.Before(tg.first()) || t.Sub(tg.last()) > tg.maxAge {
			continue
		}
		l := c.lineAt(tg, t)
		healed := l != nil && !l.healAt.IsZero() && !t.Before(l.healAt)
		if healed && l.ended {
			continue
		}
		p := c.recorded(tg, t, l != nil && !healed)
		if l != nil {
			// A replacement: once the record heals, its readings under the
			// replacement's name and UID, its process no older than the replacement.
			p.Name, p.UID = fmt.Sprintf("%s~%d", p.Name, l.n), fmt.Sprintf("%s~%d", p.UID, l.n)
			if !healed || p.StartedAt.Before(l.startedAt) {
				p.StartedAt = l.startedAt
			}
		}
		p.Terminating = !tg.terminating.IsZero() && !t.Before(tg.terminating)
		out = append(out, p)
	}
	return out
}

// Restart applies a restart of the pod uid at t. It reports false for a pod the
// column does not list (already gone).
func (c *column) Restart(uid string, t time.Time) bool {
	for _, p := range c.Pods(t) {
		if p.UID != uid {
			continue
		}
		c.restarts = append(c.restarts, t)
		// The replacement starts a few seconds after the delete, in whole seconds.
		l := &line{deletedAt: t, n: len(c.lines[p.Target]) + 1, startedAt: t.Add(5 * time.Second).Truncate(time.Second)}
		if prev := c.lineAt(p.Target, t); c.ha && c.condition(t) == state.VerdictHealthy {
			l.healAt = t // a standby's replacement is a standby: it reads the record
		} else if prev != nil && (prev.healAt.IsZero() || t.Before(prev.healAt)) {
			// A replacement restarted before the record healed: the record still
			// heals when it did.
			l.healAt, l.ended = prev.healAt, prev.ended
		} else {
			l.healAt, l.ended = c.healsAt(p.Target, t)
		}
		c.lines[p.Target] = append(c.lines[p.Target], l)
		return true
	}
	return false
}

// lineAt is the latest restart of the target made by t, or nil.
func (c *column) lineAt(tg *Target, t time.Time) *line {
	lines := c.lines[tg]
	for i := len(lines) - 1; i >= 0; i-- {
		if !t.Before(lines[i].deletedAt) {
			return lines[i]
		}
	}
	return nil
}

// condition is the column's scheduler at t as an outside observer would call it,
// by the pods a run judges: wedged when one past the startup grace reads 0 ready
// while nodes serve (for an HA scheduler replayed without --leader-lease, while
// none counts nodes: the others are standbys); else unknown when the data cannot
// tell (a gap, series that disagree, no serving count, a leader that cannot be
// told); else healthy.
func (c *column) condition(t time.Time) state.Verdict {
	n, ok := c.Expected(t)
	if !ok {
		return state.VerdictUnknown
	}
	if n == 0 {
		return state.VerdictHealthy
	}
	pods := c.Pods(t)
	judged, known := c.judged(t, pods)
	if !known {
		return state.VerdictUnknown
	}
	v, zero, counting := state.VerdictHealthy, false, false
	for _, p := range pods {
		switch {
		case !judged[p.UID]:
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

// judged is which of pods a run judges at t, by UID; not known when the leader
// cannot be told. decide.Judged is asked again only when the pods, which are
// terminating or the leader changed.
func (c *column) judged(t time.Time, pods []Pod) (map[string]bool, bool) {
	key := c.chosen.buf[:0]
	if c.leaderFromReadiness {
		holder, err := c.leader(t, pods)
		if err != nil {
			return nil, false
		}
		key = append(key, holder...)
	}
	for _, p := range pods {
		key = append(append(key, ','), p.UID...)
		if p.Terminating {
			key = append(key, " terminating"...)
		}
	}
	c.chosen.buf = key
	if c.chosen.judged == nil || string(key) != c.chosen.key {
		judged, _, _ := decide.Judged(c.observation(t), c.judge)
		c.chosen.key, c.chosen.judged = string(key), make(map[string]bool, len(judged))
		for _, p := range judged {
			c.chosen.judged[p.UID] = true
		}
	}
	return c.chosen.judged, true
}

// observation is the column at t as the watchdog's observer reports it.
func (c *column) observation(t time.Time) decide.Observation {
	pods := c.Pods(t)
	obs := decide.Observation{At: t}
	expected, known := c.Expected(t)
	obs.Expected.Serving = expected
	for _, p := range pods {
		switch {
		case p.ScrapeErr != nil: // a gap in its own series
		case !known:
			// Not an API failure of the watchdog's: the record has no count here.
			p.ScrapeErr = &scrape.Error{Kind: scrape.KindAbsent, Err: errors.New(gapReason("the serving-node count (--expected-query)", time.Time{}, t, c.step))}
		default:
			p.Sample = &scrape.Sample{Observed: map[string]int{"ready": int(math.Round(p.ReadyNodes))}, HeartbeatRejected: uint64(max(p.Rejected, 0)), HeartbeatOK: uint64(max(p.Accepted, 0))}
		}
		obs.Pods = append(obs.Pods, p.Pod)
	}
	obs.Ownership = &decide.Ownership{Deployment: c.deployment, Found: true, Chains: assumedChains(c.deployment, obs.Pods)}
	if c.leaderFromReadiness {
		holder, err := c.leader(t, pods)
		// No renewal time: the Lease's expiry is not in the history; readiness
		// recorded within its staleness is the leadership of the moment.
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

// summary measures the column over the range at the data's resolution: how long
// the scheduler was wedged and unknown, in how many wedges, and how each ended.
// Unknown time is never wedged time; a gap inside a wedge is neither its end nor
// another's start.
func (c *column) summary() WorldSummary {
	s := WorldSummary{Restarts: len(c.restarts), Wedges: []Wedge{}}
	step := c.interval
	var open *Wedge
	var unknown time.Duration // since the last wedged reading of the open wedge
	for t := c.From; !t.After(c.To); t = t.Add(step) {
		switch c.condition(t) {
		case state.VerdictWedged:
			if open == nil {
				s.Wedges = append(s.Wedges, Wedge{From: t.UTC()})
				open = &s.Wedges[len(s.Wedges)-1]
			}
			open.Unknown += state.Duration(unknown)
			unknown = 0
			s.Wedged += state.Duration(step)
		case state.VerdictUnknown:
			s.Unknown += state.Duration(step)
			if open != nil {
				unknown += step
			}
		case state.VerdictHealthy:
			if open != nil {
				open.Unknown += state.Duration(unknown)
				open.To, open.Duration = ptr.To(t.UTC()), state.Duration(t.Sub(open.From))
				open.HealedBy, open, unknown = c.healedBy(open.From, t), nil, 0
			}
		}
	}
	if open != nil {
		open.Unknown += state.Duration(unknown)
		open.Duration, open.HealedBy = state.Duration(c.To.Sub(open.From)), "still wedged at the end"
	}
	for _, wg := range s.Wedges {
		s.WorstWedge = max(s.WorstWedge, wg.Duration)
	}
	return s
}

// healedBy says what ended a wedge [from, to): the column's restart, one made
// outside the watchdog (in the record), or nothing anyone did.
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
