package backtest

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/scrape"
)

// World is the recorded history as one simulated watchdog (or the stop-gap) would
// have met it, its own restarts applied as docs/backtest.md ("How it replays")
// says: history cannot tell what a restarted scheduler would have done, so a
// replacement (pod~1, pod~2, ...) reads as many ready nodes as serve until the
// recorded pod heals by itself, then the record. It stays a new pod (its own
// name and UID) to the decision core, as live: a later wedge is its own.
type World struct {
	h *History
	// lines are, by Target.Key, the restarts of each target in the order made:
	// the world at any time is the latest made by then, so that it reads the same
	// during the replay and when measured after it.
	lines    map[string][]*line
	restarts []time.Time
	// supersededAt is, by Target.Key, when a newer pod started while the target's
	// series went on and then ended for good (a rollout): it is terminating from
	// then, as the API server would list it; history records no deletion mark.
	supersededAt map[string]time.Time
	// judge chooses the pods the summaries measure as a run chooses those it
	// judges (decide.Judged; the Deployment's by name).
	judge      decide.Config
	deployment string
	// chosen caches decide.Judged by the listing: it changes rarely, the
	// readings at every step.
	chosen struct {
		key    string
		judged map[string]bool
		buf    []byte // the key being built, reused
	}
}

// line is a target the simulation restarted.
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

// newWorld is the record with no restart made yet, as cfg judges it: the
// summaries measure the wedges of the pods a run judges (a canary's are not),
// whatever --max-pods lets it judge.
func newWorld(h *History, cfg Config) *World {
	w := &World{h: h, lines: map[string][]*line{}, supersededAt: map[string]time.Time{}, judge: cfg.Check.Decide, deployment: cfg.Deployment}
	w.judge.MaxPods = 0
	for _, old := range h.Targets {
		if h.To.Sub(old.Last()) <= w.maxAge(old) {
			continue // still reporting at the end: not replaced
		}
		for _, tg := range h.Targets {
			if tg.Namespace == old.Namespace && tg.First().After(old.First()) && !tg.First().After(old.Last()) {
				if at, ok := w.supersededAt[old.Key]; !ok || tg.First().Before(at) {
					w.supersededAt[old.Key] = tg.First()
				}
			}
		}
	}
	return w
}

// Pod is one scheduler pod of the world at a given time, as the watchdog's
// observer lists it (Terminating: a newer pod replaces it, see
// World.supersededAt), with its readings or, in a gap, ScrapeErr.
type Pod struct {
	decide.Pod
	Target                         *Target
	ReadyNodes, Rejected, Accepted float64
}

// Pods lists the world's scheduler pods at t with their readings.
func (w *World) Pods(t time.Time) []Pod {
	var out []Pod
	for _, tg := range w.h.Targets {
		if t.Before(tg.First()) || t.Sub(tg.Last()) > w.maxAge(tg) {
			continue
		}
		l := w.lineAt(tg.Key, t)
		healed := l != nil && !l.healAt.IsZero() && !t.Before(l.healAt)
		if healed && l.ended {
			continue
		}
		p := w.recorded(tg, t, l != nil && !healed)
		if l != nil {
			// A replacement: once the record heals, its readings under the
			// replacement's name and UID, its process no older than the replacement.
			p.Name, p.UID = fmt.Sprintf("%s~%d", p.Name, l.n), fmt.Sprintf("%s~%d", p.UID, l.n)
			if !healed || p.StartedAt.Before(l.startedAt) {
				p.StartedAt = l.startedAt
			}
		}
		since, superseded := w.supersededAt[tg.Key]
		p.Terminating = superseded && !t.Before(since)
		out = append(out, p)
	}
	return out
}

// Expected is the serving node count at t, if the record has it. The count is
// evaluated at every Step with its own staleness, so a missing step is a gap.
func (w *World) Expected(t time.Time) (int, bool) {
	v, _, ok := at(w.h.Expected, t, w.h.Step)
	if !ok || v < 0 {
		return 0, false
	}
	return int(math.Round(v)), true
}

// recorded is tg's pod at t as the record reads; standIn: a replacement before
// the record heals, which reads what serves.
func (w *World) recorded(tg *Target, t time.Time, standIn bool) Pod {
	p := Pod{Target: tg, Pod: decide.Pod{Name: tg.Pod, UID: tg.Pod, Phase: "Running", Ready: true, Running: true, StartedAt: w.startedAt(tg, t),
		ControllerKind: "ReplicaSet", ControllerName: replicaSetOf(tg.Pod), ControllerUID: replicaSetUID}}
	if tg.Namespace != "" {
		p.UID = tg.Namespace + "/" + tg.Pod
	}
	ready, when, ok := at(tg.Ready, t, w.maxAge(tg))
	switch {
	case !ok:
		p.ScrapeErr = &scrape.Error{Kind: scrape.KindAbsent, Err: errors.New(gapReason("the ready series", when, t, w.maxAge(tg)))}
	case standIn:
		// While the record has no count (a gap in kube-state-metrics' series, not
		// in the scheduler's), the last one known.
		if v, _, ok := at(w.h.Expected, t, math.MaxInt64); ok && v > 0 {
			p.ReadyNodes = math.Round(v)
		}
	default:
		p.ReadyNodes = ready
		// A counter series is absent until its first increment: absent is 0. During a
		// gap of the counter alone, its last value of this process stands (no rise).
		if v, seen, ok := at(tg.Rejected, t, math.MaxInt64); ok && !seen.Before(p.StartedAt) {
			p.Rejected = v
		}
		if v, seen, ok := at(tg.Accepted, t, math.MaxInt64); ok && !seen.Before(p.StartedAt) {
			p.Accepted = v
		}
	}
	return p
}

// maxAge is how old a ready sample of tg may be and still be a reading: twice
// its own scrape interval, else the scheduler's.
func (w *World) maxAge(tg *Target) time.Duration {
	if tg.MaxAge > 0 {
		return tg.MaxAge
	}
	return 2 * w.h.ScrapeInterval
}

// startedAt is the process start the record gives at t: the latest
// process_start_time_seconds, else the target's first sample. Whole seconds,
// as the API server gives container starts.
func (w *World) startedAt(tg *Target, t time.Time) time.Time {
	if v, _, ok := at(tg.StartTime, t, math.MaxInt64); ok {
		return time.Unix(int64(v), 0).UTC()
	}
	if len(tg.StartTime) > 0 {
		return time.Unix(int64(tg.StartTime[0].Value), 0).UTC()
	}
	return tg.First().Truncate(time.Second)
}

func gapReason(what string, last, t time.Time, maxAge time.Duration) string {
	if last.IsZero() {
		return fmt.Sprintf("no sample of %s before %s", what, t.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("no sample of %s for %s before %s (older than %s): a gap in the recorded history",
		what, decide.ShortDuration(t.Sub(last)), t.UTC().Format(time.RFC3339), decide.ShortDuration(maxAge))
}

// Restart applies a restart of the pod uid at t. It reports false for a pod the
// world does not list (already gone).
func (w *World) Restart(uid string, t time.Time) bool {
	for _, p := range w.Pods(t) {
		if p.UID != uid {
			continue
		}
		key := p.Target.Key
		w.restarts = append(w.restarts, t)
		// The replacement starts a few seconds after the delete, in whole seconds.
		l := &line{deletedAt: t, n: len(w.lines[key]) + 1, startedAt: t.Add(5 * time.Second).Truncate(time.Second)}
		if prev := w.lineAt(key, t); prev != nil && (prev.healAt.IsZero() || t.Before(prev.healAt)) {
			// A replacement restarted before the record healed: the record still
			// heals when it did.
			l.healAt, l.ended = prev.healAt, prev.ended
		} else {
			l.healAt, l.ended = w.healsAt(p.Target, t)
		}
		w.lines[key] = append(w.lines[key], l)
		return true
	}
	return false
}

// lineAt is the latest restart of the target made by t, or nil.
func (w *World) lineAt(key string, t time.Time) *line {
	lines := w.lines[key]
	for i := len(lines) - 1; i >= 0; i-- {
		if !t.Before(lines[i].deletedAt) {
			return lines[i]
		}
	}
	return nil
}

// healsAt is when the record of tg heals by itself after t: its first ready
// sample above 0, a new process, or the end of its series.
func (w *World) healsAt(tg *Target, t time.Time) (time.Time, bool) {
	ts := model.TimeFromUnixNano(t.UnixNano())
	start := w.startedAt(tg, t)
	i := sort.Search(len(tg.Ready), func(i int) bool { return tg.Ready[i].Timestamp > ts })
	for ; i < len(tg.Ready); i++ {
		s := tg.Ready[i]
		when := s.Timestamp.Time()
		if s.Value > 0 || !w.startedAt(tg, when).Equal(start) {
			return when, false
		}
	}
	if w.h.To.Sub(tg.Last()) > w.maxAge(tg) {
		return tg.Last(), true
	}
	return time.Time{}, false
}

// condition is the world's scheduler at t as an outside observer would call it,
// by the pods a run judges (w.judge): wedged when one past the startup grace
// reads 0 ready while nodes serve; else unknown when the data cannot tell (a gap
// in a pod's series, no serving-node count, a leader that cannot be told); else
// healthy.
func (w *World) condition(t time.Time) decide.Verdict {
	n, ok := w.Expected(t)
	if !ok {
		return decide.VerdictUnknown
	}
	if n == 0 {
		return decide.VerdictHealthy
	}
	pods := w.Pods(t)
	judged, known := w.judged(t, pods)
	if !known {
		return decide.VerdictUnknown
	}
	c := decide.VerdictHealthy
	for _, p := range pods {
		switch {
		case !judged[p.UID]:
			// Not judged: its readings say nothing of the scheduler that serves.
		case p.ScrapeErr != nil:
			c = decide.VerdictUnknown
		case p.ReadyNodes == 0 && t.Sub(p.StartedAt) >= w.judge.StartupGrace:
			return decide.VerdictWedged
		}
	}
	return c
}

// judged is which of pods a run judges at t, by UID; not known when the leader
// cannot be told. decide.Judged is asked again only when the pods, which are
// terminating or the leader changed.
func (w *World) judged(t time.Time, pods []Pod) (map[string]bool, bool) {
	key := w.chosen.buf[:0]
	if w.h.LeaderFromReadiness {
		holder, err := w.leader(t, pods)
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
	w.chosen.buf = key
	if w.chosen.judged == nil || string(key) != w.chosen.key {
		judged, _, _ := decide.Judged(w.observation(t), w.judge)
		w.chosen.key, w.chosen.judged = string(key), make(map[string]bool, len(judged))
		for _, p := range judged {
			w.chosen.judged[p.UID] = true
		}
	}
	return w.chosen.judged, true
}

// observation is the world at t as the watchdog's observer reports it.
func (w *World) observation(t time.Time) decide.Observation {
	pods := w.Pods(t)
	obs := decide.Observation{At: t}
	expected, known := w.Expected(t)
	obs.Expected.Serving = expected
	for _, p := range pods {
		switch {
		case p.ScrapeErr != nil: // a gap in its own series
		case !known:
			// Not an API failure of the watchdog's: the record has no count here.
			p.ScrapeErr = &scrape.Error{Kind: scrape.KindAbsent, Err: errors.New(gapReason("the serving-node count (--expected-query)", time.Time{}, t, w.h.Step))}
		default:
			p.Sample = &scrape.Sample{Observed: map[string]int{"ready": int(math.Round(p.ReadyNodes))}, HeartbeatRejected: uint64(max(p.Rejected, 0)), HeartbeatOK: uint64(max(p.Accepted, 0))}
		}
		obs.Pods = append(obs.Pods, p.Pod)
	}
	obs.Ownership = &decide.Ownership{Deployment: w.deployment, Found: true, Chains: assumedChains(w.deployment, obs.Pods)}
	if w.h.LeaderFromReadiness {
		holder, err := w.leader(t, pods)
		// No renewal time: the Lease's expiry is not in the history; readiness
		// recorded within its staleness is the leadership of the moment.
		obs.Leader = &decide.Leader{Holder: holder, Err: err}
	}
	return obs
}

// leader is the HA scheduler's leader among pods at t: the one pod whose recent
// readiness is 1. Else it cannot be told: an error, so that nobody is judged
// rather than a standby on a guess.
func (w *World) leader(t time.Time, pods []Pod) (string, error) {
	var ready, unknown []string
	maxAge := 2 * w.h.PodReadyInterval
	for _, p := range pods {
		v, _, ok := at(p.Target.PodReady, t, maxAge)
		switch {
		case !ok:
			unknown = append(unknown, p.Name)
		case v == 1:
			ready = append(ready, p.Name)
		}
	}
	switch {
	case len(unknown) > 0:
		return "", fmt.Errorf("the history cannot tell the leader at %s: no readiness (--pod-ready-series) recorded for %s within %s",
			t.UTC().Format(time.RFC3339), strings.Join(unknown, ", "), decide.ShortDuration(maxAge))
	case len(ready) == 1:
		return ready[0], nil
	case len(ready) == 0:
		return "", fmt.Errorf("the history cannot tell the leader at %s: no scheduler pod was ready (readiness is leadership)", t.UTC().Format(time.RFC3339))
	default:
		return "", fmt.Errorf("the history cannot tell the leader at %s: %s were all ready (readiness is leadership)", t.UTC().Format(time.RFC3339), strings.Join(ready, ", "))
	}
}

// replicaSetOf is the ReplicaSet a pod's name (<deployment>-<hash>-<suffix>)
// says it belongs to: history has no owner references.
func replicaSetOf(pod string) string {
	if i := strings.LastIndexByte(pod, '-'); i > 0 {
		return pod[:i]
	}
	return ""
}

// replicaSetUID stands for the scheduler's ReplicaSet, which history does not
// record: the rollout gate and the rollout method's owner chain pass.
const replicaSetUID = "backtest"
