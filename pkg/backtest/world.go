package backtest

import (
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
// have met it, its own restarts applied. History cannot say what a restarted
// scheduler would have done, so the backtest assumes what a restart is for: the
// restarted pod leaves the listing at once, and a replacement (named pod~1,
// pod~2, ...) reads as many ready nodes as the API server serves, from when it
// starts, until the recorded pod heals on its own (ready above 0 again, a new
// process, or its series end); from then on the world follows the record again.
// The replacement's data has the record's gaps.
type World struct {
	h     *History
	lines map[string]*line // by Target.Key
	// made counts the replacements of each target, so that no two share a name.
	made map[string]int
	// restarts are the times of the restarts made.
	restarts []time.Time
}

// line is a target the simulation restarted.
type line struct {
	deletedAt time.Time
	// healAt is when the record heals by itself; zero: not within the range.
	// ended: it heals by ending (the pod is gone from the record), after which
	// neither it nor a replacement is listed.
	healAt time.Time
	ended  bool
	// n numbers the current replacement; startedAt is its start.
	n         int
	startedAt time.Time
}

// NewWorld is the record with no restart made yet.
func NewWorld(h *History) *World {
	return &World{h: h, lines: map[string]*line{}, made: map[string]int{}}
}

// Pod is one scheduler pod of the world at a given time.
type Pod struct {
	Name, UID string
	Target    *Target
	// Replacement: the pod stands in for a restarted one (see World).
	Replacement bool
	StartedAt   time.Time
	// Ready and Rejected are its readings; Gap says why there are none.
	Ready, Rejected float64
	Gap             string
}

// Pods lists the world's scheduler pods at t with their readings.
func (w *World) Pods(t time.Time) []Pod {
	var out []Pod
	for _, tg := range w.h.Targets {
		if t.Before(tg.First()) || t.Sub(tg.Last()) > w.h.MaxAge {
			continue
		}
		uid := podUID(tg)
		l := w.lines[tg.Key]
		switch {
		case l == nil || t.Before(l.deletedAt):
			out = append(out, w.recorded(tg, uid, t))
		case l.healAt.IsZero() || t.Before(l.healAt):
			out = append(out, w.replacement(tg, uid, l, t))
		case !l.ended:
			out = append(out, w.recorded(tg, uid, t))
		}
	}
	return out
}

// Expected is the serving node count at t, if the record has it.
func (w *World) Expected(t time.Time) (int, bool) {
	v, _, ok := at(w.h.Expected, t, 2*w.h.Step)
	if !ok || v < 0 {
		return 0, false
	}
	return int(math.Round(v)), true
}

func podUID(tg *Target) string {
	if tg.Namespace != "" {
		return tg.Namespace + "/" + tg.Pod
	}
	return tg.Pod
}

func (w *World) recorded(tg *Target, uid string, t time.Time) Pod {
	p := Pod{Name: tg.Pod, UID: uid, Target: tg, StartedAt: w.startedAt(tg, t)}
	ready, when, ok := at(tg.Ready, t, w.h.MaxAge)
	if !ok {
		p.Gap = gapReason("the ready series", when, t, w.h.MaxAge)
		return p
	}
	p.Ready = ready
	// A counter series is absent until its first increment: absent is 0. During a
	// gap of the counter alone, its last value of this process stands (no rise).
	if v, seen, ok := at(tg.Rejected, t, math.MaxInt64); ok && !seen.Before(p.StartedAt) {
		p.Rejected = v
	}
	return p
}

func (w *World) replacement(tg *Target, uid string, l *line, t time.Time) Pod {
	p := Pod{Name: fmt.Sprintf("%s~%d", tg.Pod, l.n), UID: fmt.Sprintf("%s~%d", uid, l.n), Target: tg, Replacement: true, StartedAt: l.startedAt}
	if _, when, ok := at(tg.Ready, t, w.h.MaxAge); !ok {
		p.Gap = gapReason("the ready series", when, t, w.h.MaxAge)
		return p
	}
	if n, ok := w.Expected(t); ok {
		p.Ready = float64(n)
	}
	return p
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
		l := w.lines[key]
		if l == nil || (!l.healAt.IsZero() && !t.Before(l.healAt)) {
			l = &line{deletedAt: t}
			l.healAt, l.ended = w.healsAt(p.Target, t)
			w.lines[key] = l
		}
		// The replacement starts a few seconds after the delete, in whole seconds.
		w.made[key]++
		w.restarts = append(w.restarts, t)
		l.n = w.made[key]
		l.startedAt = t.Add(5 * time.Second).Truncate(time.Second)
		return true
	}
	return false
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
	if w.h.To.Sub(tg.Last()) > w.h.MaxAge {
		return tg.Last(), true
	}
	return time.Time{}, false
}

// wedged reports whether the world's scheduler is wedged at t, as an outside
// observer would call it: a pod past startupGrace reads 0 ready while nodes serve.
func (w *World) wedged(t time.Time, startupGrace time.Duration) bool {
	n, ok := w.Expected(t)
	if !ok || n == 0 {
		return false
	}
	for _, p := range w.Pods(t) {
		if p.Gap == "" && p.Ready == 0 && t.Sub(p.StartedAt) >= startupGrace {
			return true
		}
	}
	return false
}

// observation is the world at t as the watchdog's observer reports it.
func (w *World) observation(t time.Time, deployment string) decide.Observation {
	obs := decide.Observation{At: t}
	expected, known := w.Expected(t)
	obs.Expected.Serving = expected
	for _, p := range w.Pods(t) {
		dp := decide.Pod{Name: p.Name, UID: p.UID, Phase: "Running", Ready: true, Running: true, StartedAt: p.StartedAt,
			ControllerKind: "ReplicaSet", ControllerName: replicaSetOf(p.Name), ControllerUID: replicaSetUID}
		switch {
		case p.Gap != "":
			dp.ScrapeErr = &scrape.Error{Kind: scrape.KindAbsent, Err: fmt.Errorf("%s", p.Gap)}
		case !known:
			// Not an API failure of the watchdog's: the record has no count here.
			dp.ScrapeErr = &scrape.Error{Kind: scrape.KindAbsent, Err: fmt.Errorf("%s", gapReason("the serving-node count (--expected-query)", time.Time{}, t, 2*w.h.Step))}
		default:
			dp.Sample = &scrape.Sample{Observed: map[string]int{"ready": int(math.Round(p.Ready))}, HeartbeatRejected: uint64(max(p.Rejected, 0))}
		}
		obs.Pods = append(obs.Pods, dp)
	}
	obs.Ownership = &decide.Ownership{Deployment: deployment, Found: true, Chains: assumedChains(deployment, obs.Pods)}
	return obs
}

// replicaSetOf is the ReplicaSet a pod's name says it belongs to: a Deployment's
// pods are named <deployment>-<template hash>-<suffix>. History has no owner
// references; the name is all there is.
func replicaSetOf(pod string) string {
	if i := strings.LastIndexByte(pod, '-'); i > 0 {
		return pod[:i]
	}
	return ""
}

// replicaSetUID stands for the scheduler's ReplicaSet, which history does not
// record: the rollout gate and the rollout method's owner chain pass.
const replicaSetUID = "backtest"
