package backtest

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/state"
)

// World is the History as built once (build) and never changed by a replay: the
// scheduler's pods (by first sample) and what the record shows happened to each.
type World struct {
	*History
	Targets []*Target
	// interval is the ready samples' median spacing, podReadyInterval the readiness'.
	interval, podReadyInterval time.Duration
	// leaderFromReadiness: --leader-lease, the leader being the one pod ready; ha:
	// without it, one of several pods counting nodes, the others standbys (not wedged).
	leaderFromReadiness, ha bool
	// judge chooses the pods the summaries measure as a run does, whatever --max-pods.
	judge      decide.Selection
	grace      time.Duration
	deployment string
	Warnings   []string
}

// Target is one scheduler pod: its series of every job and label set, merged.
type Target struct {
	Pod, Namespace, UID                            string
	Ready, Rejected, Accepted, StartTime, PodReady []model.SamplePair
	// maxAge is twice the pod's own scrape interval: an older ready sample is a gap.
	maxAge time.Duration
	// disagree: spans in which two of its series read different counts (unknown).
	disagree [][2]time.Time
	// terminating is when a newer pod of its Deployment replaced it (zero: never);
	// outside: it was wedged then, a restart made outside the watchdog.
	terminating time.Time
	outside     bool
}

func (t *Target) first() time.Time { return t.Ready[0].Timestamp.Time() }
func (t *Target) last() time.Time  { return t.Ready[len(t.Ready)-1].Timestamp.Time() }

// build makes the World of h as cfg judges it.
func build(h *History, cfg Config) (*World, error) {
	w := &World{History: h, judge: cfg.Check.Decide.Selection, grace: cfg.Check.Decide.StartupGrace, deployment: cfg.Deployment, Warnings: slices.Clone(h.Warnings)}
	w.judge.MaxPods = 0
	w.join()
	if h.Queries.PodReady != "" {
		if !slices.ContainsFunc(w.Targets, func(t *Target) bool { return len(t.PodReady) > 0 }) {
			return nil, fmt.Errorf("--leader-lease: the history has no readiness of the scheduler pods (--pod-ready-series %s, joined by its label %s) between %s and %s, "+
				"so the leader of an HA scheduler cannot be told and its standbys (ready 0 by design) would be judged wedged: "+
				"kube-state-metrics exports kube_pod_status_ready by default; or drop --leader-lease for a scheduler with one replica",
				h.Queries.PodReady, h.Queries.KSMPodLabel, h.From.Format(time.RFC3339), h.To.Format(time.RFC3339))
		}
		w.leaderFromReadiness, w.podReadyInterval = true, cmp.Or(medianSpacing(valuesOf(h.PodReady)...), w.interval)
	}
	w.replacements()
	w.warn(cfg)
	return w, nil
}

// join makes one Target per namespace and pod: a live run lists pods, not series,
// so several scrape targets of one (two jobs, a relabeling, two Prometheus) are one.
func (w *World) join() {
	h := w.History
	byKey, byPod := map[string]*Target{}, map[string]*Target{}
	labels, ready := map[string]model.Metric{}, map[string][]model.SamplePair{}
	for _, s := range h.Ready {
		ns, pod := string(s.Metric["namespace"]), string(cmp.Or(s.Metric[model.LabelName(h.Queries.PodLabel)], s.Metric[model.InstanceLabel]))
		uid := strings.TrimPrefix(ns+"/"+pod, "/") // namespace/pod, or pod
		if byPod[uid] == nil {
			byPod[uid] = &Target{Pod: pod, Namespace: ns, UID: uid}
			w.Targets = append(w.Targets, byPod[uid])
		}
		key := targetKey(s.Metric)
		byKey[key], labels[key], ready[key] = byPod[uid], s.Metric, mergeSamples(ready[key], s.Values)
	}
	for i, series := range [][]*model.SampleStream{h.Rejected, h.Accepted, h.StartTime} {
		for _, s := range series {
			if tg := byKey[targetKey(s.Metric)]; tg != nil {
				into := []*[]model.SamplePair{&tg.Rejected, &tg.Accepted, &tg.StartTime}[i]
				*into = mergeSamples(*into, s.Values)
			}
		}
	}
	// Each scrape target of a pod: its staleness, and where it disagrees with another.
	seen := map[*Target][]string{}
	for _, key := range slices.Sorted(maps.Keys(byKey)) {
		tg := byKey[key]
		tg.Ready, tg.maxAge = mergeSamples(tg.Ready, ready[key]), max(tg.maxAge, 2*medianSpacing(ready[key]))
		for _, other := range seen[tg] {
			if d := disagreements(ready[other], ready[key], 2*medianSpacing(ready[other])); len(d) > 0 {
				tg.disagree = append(tg.disagree, d...)
				w.Warnings = append(w.Warnings, fmt.Sprintf("pod %s: its series %s and %s disagree on the ready count between %s and %s: "+
					"a live run reads one of them and the replay cannot tell which, so that time is unknown", tg.Pod, differing(labels[other], labels[key]),
					differing(labels[key], labels[other]), d[0][0].UTC().Format(time.RFC3339), d[len(d)-1][1].UTC().Format(time.RFC3339)))
			}
		}
		seen[tg] = append(seen[tg], key)
	}
	w.interval = cmp.Or(medianSpacing(slices.Collect(maps.Values(ready))...), 15*time.Second) // one sample: Prometheus' usual
	w.Targets = slices.DeleteFunc(w.Targets, func(t *Target) bool { return len(t.Ready) == 0 })
	for _, tg := range w.Targets {
		for _, s := range h.PodReady {
			if string(s.Metric[model.LabelName(h.Queries.KSMPodLabel)]) == tg.Pod {
				tg.PodReady = mergeSamples(tg.PodReady, s.Values)
			}
		}
		if tg.maxAge == 0 {
			tg.maxAge = 2 * w.interval
		}
		// A start a day after its scrape is no time (milliseconds: a year > 9999): unknown, as a missing one.
		n := len(tg.StartTime)
		tg.StartTime = slices.DeleteFunc(tg.StartTime, func(s model.SamplePair) bool {
			return !(s.Value >= 0 && float64(s.Value) <= float64(s.Timestamp.Unix()+86400)) // NaN too; less is skew (decide)
		})
		if n > len(tg.StartTime) {
			w.Warnings = append(w.Warnings, fmt.Sprintf("pod %s: %d process_start_time_seconds samples (--start-time-series) "+
				"are no time (NaN, negative, or a day after their scrape: milliseconds?): ignored", tg.Pod, n-len(tg.StartTime)))
		}
		if len(tg.StartTime) == 0 {
			w.Warnings = append(w.Warnings, fmt.Sprintf("pod %s: no process_start_time_seconds (--start-time-series): its age is taken from its first sample, so a container restart is not seen as one", tg.Pod))
		}
	}
	slices.SortStableFunc(w.Targets, func(a, b *Target) int { return cmp.Or(a.first().Compare(b.first()), strings.Compare(a.UID, b.UID)) })
}

// disagreements are the spans in which a sample of b differs from a's on both sides
// within maxAge (a change between two scrapes is none, nor a reading in a's gap).
func disagreements(a, b []model.SamplePair, maxAge time.Duration) [][2]time.Time {
	var out [][2]time.Time
	for _, s := range b {
		i := sort.Search(len(a), func(i int) bool { return a[i].Timestamp > s.Timestamp })
		if i == 0 || i == len(a) || a[i-1].Value == s.Value || a[i].Value == s.Value || a[i].Timestamp.Sub(a[i-1].Timestamp) > maxAge {
			continue
		}
		// In time order: a span overlapping the last extends it.
		if n := len(out); n > 0 && !a[i-1].Timestamp.Time().After(out[n-1][1]) {
			out[n-1][1] = a[i].Timestamp.Time()
		} else {
			out = append(out, [2]time.Time{a[i-1].Timestamp.Time(), a[i].Timestamp.Time()})
		}
	}
	return out
}

// differing is a's labels whose values b does not share: what tells two scrapes apart.
func differing(a, b model.Metric) string {
	out := model.Metric{}
	for k, v := range a {
		if b[k] != v {
			out[k] = v
		}
	}
	return out.String()
}

// replacements marks each pod whose series ended early while a newer pod of its Deployment (by name:
// history has no owner references; not a canary) started at most a rollout's overlap before its last
// sample, or just after: from that start it is terminating, as the API server lists a pod being replaced.
func (w *World) replacements() {
	for _, old := range w.Targets {
		if w.To.Sub(old.last()) <= old.maxAge {
			continue // still reporting at the end
		}
		for _, tg := range w.Targets {
			start := w.startedAt(tg, tg.first())
			if tg != old && tg.Namespace == old.Namespace && deploymentOf(tg.Pod) != "" && deploymentOf(tg.Pod) == deploymentOf(old.Pod) &&
				tg.first().After(old.first()) && start.After(old.last().Add(-severalAtOnce)) && !start.After(old.last().Add(old.maxAge)) &&
				(old.terminating.IsZero() || start.Before(old.terminating)) {
				old.terminating = start
			}
		}
	}
}

// warn adds what changes how to read the replay: several pods at once (HA?), pods
// restarted outside the watchdog, a wrong serving count, data coarser than samples.
func (w *World) warn(cfg Config) {
	rec := w.column()
	var overlap, oneReady time.Duration
	var first time.Time
	most := 0
	for t := w.From; !t.After(w.To); t = t.Add(w.interval) {
		// The pods a live run would judge at t, by owner alone (leader or standby).
		pods := slices.DeleteFunc(rec.Pods(t), func(p Pod) bool {
			return p.Terminating || p.ScrapeErr != nil || (w.judge.JudgePods == decide.JudgeDeployment && !decide.OwnedByName(p.Pod, w.deployment))
		})
		if len(pods) > 1 {
			first, most = cmp.Or(first, t), max(most, len(pods))
			overlap += w.interval
			// Replicas of the Deployment (by name), one counting nodes: an HA scheduler.
			if !slices.ContainsFunc(pods, func(p Pod) bool { return !decide.OwnedByName(p.Pod, w.deployment) }) &&
				len(slices.DeleteFunc(pods, func(p Pod) bool { return p.ReadyNodes == 0 })) == 1 {
				oneReady += w.interval
			}
		}
	}
	if overlap > severalAtOnce && !w.leaderFromReadiness {
		w.ha = oneReady > overlap/2
		at := fmt.Sprintf("up to %d scheduler pods reported at once, for %s in all (first at %s)", most, decide.ShortDuration(overlap), first.UTC().Format(time.RFC3339))
		if w.ha {
			w.Warnings = append(w.Warnings, "this looks like an HA scheduler: "+at+", exactly one counting nodes (the leader) and the others 0 (standbys, by design). "+
				"A live run without --leader-lease judges every pod: the standbys read wedged and the single-target gate refuses every restart and pages restart-blocked, as replayed here; "+
				"with --leader-lease (the scheduler's Lease) only the holder is judged, replayed as the pod kube-state-metrics records ready (--pod-ready-series): pass --leader-lease. "+
				"No summary counts a standby as wedged, and a standby restarted (by the stop-gap) is a standby again")
		} else {
			w.Warnings = append(w.Warnings, at+": every one is judged, as a live run without --leader-lease would, and the single-target gate refuses every restart; "+
				"if the scheduler runs HA (standbys read 0 ready by design), pass --leader-lease: the leader is then the pod kube-state-metrics records ready (--pod-ready-series)")
		}
	}
	for _, tg := range w.Targets {
		if !tg.terminating.IsZero() && rec.condition(tg.terminating.Add(-time.Millisecond)) == state.VerdictWedged {
			if v, _, ok := at(tg.Ready, tg.terminating, tg.maxAge); ok && v == 0 {
				tg.outside = true
				w.Warnings = append(w.Warnings, fmt.Sprintf("pod %s was replaced at %s while wedged (its series ended as a new pod of its Deployment started): "+
					"a restart made outside the watchdog (the stop-gap, a person), shown as %q in every column", tg.Pod, tg.terminating.UTC().Format(time.RFC3339), healedOutside))
			}
		}
	}
	positive := func(s model.SamplePair) bool { return s.Value > 0 }
	if len(w.Expected) > 0 && !slices.ContainsFunc(w.Expected, positive) && slices.ContainsFunc(w.Targets, func(t *Target) bool { return slices.ContainsFunc(t.Ready, positive) }) {
		w.Warnings = append(w.Warnings, "the serving-node count (--expected-query) read 0 over the whole range while the scheduler counted ready nodes, "+
			"so every wedge reads as no-nodes: the query likely does not match kube-state-metrics' labels; "+ksmVariants)
	}
	for _, s := range []struct {
		name     string
		interval time.Duration
	}{{"the scheduler's ready gauge", w.interval}, {"the rejected-heartbeat counter", medianSpacing(valuesOf(w.Rejected)...)},
		{"the serving-node count (--expected-query)", w.ExpectedInterval}, {"the pods' readiness (--pod-ready-series, the leader)", w.podReadyInterval}} {
		if si := cfg.Check.SampleInterval; s.interval > si {
			w.Warnings = append(w.Warnings, fmt.Sprintf("%s was recorded every %s, coarser than --sample-interval %s: confirmation samples within one interval repeat the same reading",
				s.name, decide.ShortDuration(s.interval), decide.ShortDuration(si)))
		}
	}
}

// severalAtOnce is longer than a rollout's overlap.
const severalAtOnce = 10 * time.Minute

// serving is the serving node count at t, if the record has it: a missing step is a gap.
func (w *World) serving(t time.Time) (int, bool) {
	v, _, ok := at(w.Expected, t, w.Step)
	if !ok || v < 0 {
		return 0, false
	}
	return int(math.Round(v)), true
}

// startedAt is the process start at t: the latest process_start_time_seconds,
// else the first sample; whole seconds, as the API server gives container starts.
func (w *World) startedAt(tg *Target, t time.Time) time.Time {
	if v, _, ok := at(tg.StartTime, t, math.MaxInt64); ok {
		return time.Unix(int64(v), 0).UTC()
	}
	if len(tg.StartTime) > 0 {
		return time.Unix(int64(tg.StartTime[0].Value), 0).UTC()
	}
	return tg.first().Truncate(time.Second)
}

func gapReason(what string, last, t time.Time, maxAge time.Duration) string {
	if last.IsZero() {
		return fmt.Sprintf("no sample of %s before %s", what, t.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("no sample of %s for %s before %s (older than %s): a gap in the recorded history",
		what, decide.ShortDuration(t.Sub(last)), t.UTC().Format(time.RFC3339), decide.ShortDuration(maxAge))
}

// healsAt is when the record of tg heals by itself after t: its first ready
// sample above 0, a new process, or the end of its series.
func (w *World) healsAt(tg *Target, t time.Time) (time.Time, bool) {
	ts := model.TimeFromUnixNano(t.UnixNano())
	start := w.startedAt(tg, t)
	i := sort.Search(len(tg.Ready), func(i int) bool { return tg.Ready[i].Timestamp > ts })
	for _, s := range tg.Ready[i:] {
		if when := s.Timestamp.Time(); s.Value > 0 || !w.startedAt(tg, when).Equal(start) {
			return when, false
		}
	}
	if w.To.Sub(tg.last()) > tg.maxAge {
		return tg.last(), true
	}
	return time.Time{}, false
}

// leader is the HA scheduler's leader among pods at t: the one pod recently
// ready. Else an error, so that nobody is judged rather than a standby on a guess.
func (w *World) leader(t time.Time, pods []Pod) (string, error) {
	var ready, unknown []string
	maxAge := 2 * w.podReadyInterval
	for _, p := range pods {
		if v, _, ok := at(p.Target.PodReady, t, maxAge); !ok {
			unknown = append(unknown, p.Name)
		} else if v == 1 {
			ready = append(ready, p.Name)
		}
	}
	switch {
	case len(unknown) > 0:
		return "", fmt.Errorf("the history cannot tell the leader at %s: no readiness (--pod-ready-series) recorded for %s within %s",
			t.UTC().Format(time.RFC3339), strings.Join(unknown, ", "), decide.ShortDuration(maxAge))
	case len(ready) != 1:
		return "", fmt.Errorf("the history cannot tell the leader at %s: %d scheduler pods were ready [%s], want one (readiness is leadership)",
			t.UTC().Format(time.RFC3339), len(ready), strings.Join(ready, ", "))
	}
	return ready[0], nil
}

// replicaSetOf is the ReplicaSet a pod's name (<deployment>-<hash>-<suffix>)
// says, deploymentOf its Deployment: history has no owner references.
func replicaSetOf(pod string) string {
	if i := strings.LastIndexByte(pod, '-'); i > 0 {
		return pod[:i]
	}
	return ""
}

func deploymentOf(pod string) string { return replicaSetOf(replicaSetOf(pod)) }

// replicaSetUID stands for the unrecorded ReplicaSet: owner chains and the rollout gate pass.
const replicaSetUID = "backtest"

// targetKey is a series' scrape target: its labels less the metric's own.
func targetKey(m model.Metric) string {
	c := m.Clone()
	for _, l := range []model.LabelName{model.MetricNameLabel, "status", "rpc"} {
		delete(c, l)
	}
	return c.String()
}
