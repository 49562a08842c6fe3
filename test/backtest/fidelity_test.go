package backtest

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/watchdog/pkg/backtest"
	"github.com/agentenv/watchdog/pkg/cli"
)

// Replays a live run would decide in a given way, each found decided otherwise
// by an earlier replay: repeat wedges, a gap inside a wedge, a sparse
// kube-state-metrics, a weak wedge, several pods (a rollout, a canary) and an
// HA scheduler.

func span(from, to time.Time) [][2]time.Time { return [][2]time.Time{{from, to}} }

// zeroIn reads 0 inside any span and 3 outside.
func zeroIn(spans ...[2]time.Time) func(time.Time) float64 {
	return func(t time.Time) float64 {
		if inside(spans, t) {
			return 0
		}
		return 3
	}
}

func fidelitySituations() []situation {
	three := func(time.Time) int { return 3 }
	old := startedAt(base.Add(-3 * time.Hour))
	w1, w2 := base.Add(time.Hour+2*time.Minute+10*time.Second), base.Add(2*time.Hour+12*time.Minute+10*time.Second)
	gw := base.Add(time.Hour + 2*time.Minute + 10*time.Second)
	roll := base.Add(time.Hour + 30*time.Minute) // on a CronJob run: it sees both pods
	haWedge := base.Add(2*time.Hour + 2*time.Minute + 10*time.Second)
	one := func(time.Time) float64 { return 1 }
	zero := func(time.Time) float64 { return 0 }
	return []situation{{
		// Discovery died twice: at +1h02m (healed by itself at +1h40m) and at
		// +2h12m until the end, rejected heartbeats rising both times.
		ns: "bt-repeat", from: base, to: base.Add(4 * time.Hour), scrape: 15 * time.Second, serving: three,
		pods: []schedPod{{name: sched + "r1p2t", ip: "10.0.1.1", from: base, to: base.Add(4 * time.Hour), start: old,
			ready: zeroIn([2]time.Time{w1.Add(40 * time.Second), base.Add(time.Hour + 40*time.Minute)}, [2]time.Time{w2.Add(40 * time.Second), base.Add(5 * time.Hour)}),
			rejected: func(t time.Time) (float64, bool) {
				first, _ := rejections(w1, base.Add(time.Hour+40*time.Minute))(t)
				second, ok := rejections(w2, base.Add(5*time.Hour))(t)
				if t.Before(w1) {
					return 0, false
				}
				return first + map[bool]float64{true: second}[ok], true
			}}},
	}, {
		// A 39-minute weak wedge (no rejections) with a 5-minute gap in the
		// scheduler's series in its middle.
		ns: "bt-gapwedge", from: base, to: base.Add(3 * time.Hour), scrape: 15 * time.Second, serving: three,
		pods: []schedPod{{name: sched + "g1w2d", ip: "10.0.1.2", from: base, to: base.Add(3 * time.Hour), start: old,
			ready: zeroIn([2]time.Time{gw, gw.Add(39 * time.Minute)}), rejected: absent,
			gaps: span(gw.Add(17*time.Minute), gw.Add(22*time.Minute))}},
	}, {
		// kube-state-metrics scraped every 60 s, the scheduler every 15 s; a weak
		// wedge (ready 0, no rejections) from +1h02m to the end.
		ns: "bt-sparse", from: base, to: base.Add(3 * time.Hour), scrape: 15 * time.Second, serving: three, ksm: time.Minute,
		pods: []schedPod{{name: sched + "s1k2m", ip: "10.0.1.3", from: base, to: base.Add(3 * time.Hour), start: old,
			ready: zeroIn([2]time.Time{base.Add(time.Hour + 2*time.Minute), base.Add(4 * time.Hour)}), rejected: absent}},
	}, {
		// A weak wedge with kube-state-metrics every 30 s: ready 0, the nodes'
		// heartbeats not reaching the scheduler at all (no rejections).
		ns: "bt-weak", from: base, to: base.Add(3 * time.Hour), scrape: 15 * time.Second, serving: three,
		pods: []schedPod{{name: sched + "w1e2k", ip: "10.0.1.4", from: base, to: base.Add(3 * time.Hour), start: old,
			ready: zeroIn([2]time.Time{base.Add(time.Hour + 2*time.Minute), base.Add(4 * time.Hour)}), rejected: absent}},
	}, {
		// A rollout at +1h30m: the new pod starts (ready 0 for 45 s), the old one
		// drains (ready 0) and its series ends 4 minutes later.
		ns: "bt-rollout", from: base, to: base.Add(3 * time.Hour), scrape: 15 * time.Second, serving: three,
		pods: []schedPod{
			{name: sched + "o1l2d", ip: "10.0.1.5", from: base, to: roll.Add(4 * time.Minute), start: old,
				ready: zeroIn([2]time.Time{roll, roll.Add(time.Hour)}), rejected: absent},
			{name: "agentenv-scheduler-6c9a1-n3e4w", ip: "10.0.1.6", from: roll, to: base.Add(3 * time.Hour), start: startedAt(roll),
				ready: zeroIn([2]time.Time{roll, roll.Add(45 * time.Second)}), rejected: absent},
		},
	}, {
		// A canary beside the scheduler, sharing its labels, wedged for two hours;
		// the scheduler is healthy.
		ns: "bt-canary", from: base, to: base.Add(3 * time.Hour), scrape: 15 * time.Second, serving: three,
		pods: []schedPod{
			{name: sched + "h1e2a", ip: "10.0.1.7", from: base, to: base.Add(3 * time.Hour), start: old, ready: constant(3), rejected: absent},
			{name: "agentenv-scheduler-canary-7f8e9-c1c2c", ip: "10.0.1.8", from: base, to: base.Add(3 * time.Hour), start: old,
				ready: zeroIn([2]time.Time{base.Add(time.Hour), base.Add(3 * time.Hour)}), rejected: absent},
		},
	}, {
		// An HA scheduler: 3 replicas, the leader ready (readiness is leadership),
		// the standbys reading 0 by design. Healthy for two hours; the leader's
		// discovery dies at +2h02m.
		ns: "bt-ha", from: base, to: base.Add(3 * time.Hour), scrape: 15 * time.Second, serving: three,
		pods: []schedPod{
			{name: sched + "l1e2a", ip: "10.0.1.9", from: base, to: base.Add(3 * time.Hour), start: old, podReady: one,
				ready: zeroIn([2]time.Time{haWedge.Add(40 * time.Second), base.Add(4 * time.Hour)}), rejected: rejections(haWedge, base.Add(4*time.Hour))},
			{name: sched + "s1t2b", ip: "10.0.1.10", from: base, to: base.Add(3 * time.Hour), start: old, podReady: zero, ready: constant(0), rejected: absent},
			{name: sched + "s3t4b", ip: "10.0.1.11", from: base, to: base.Add(3 * time.Hour), start: old, podReady: zero, ready: constant(0), rejected: absent},
		},
	}}
}

func summaryLine(res *backtest.Result) string {
	return fmt.Sprintf("watchdog: %d restarts, %d blocked, %d pages, wedged %s in %d wedges (worst %s); stop-gap: %d restarts, wedged %s (worst %s); as recorded: wedged %s in %d wedges (worst %s)",
		res.Summary.Restarts, res.Summary.Blocked, res.Summary.Pages, res.Summary.Wedged.D(), len(res.Summary.Wedges), res.Summary.WorstWedge.D(),
		res.StopGap.Summary.Restarts, res.StopGap.Summary.Wedged.D(), res.StopGap.Summary.WorstWedge.D(),
		res.AsRecorded.Wedged.D(), len(res.AsRecorded.Wedges), res.AsRecorded.WorstWedge.D())
}

// replay is backtestRun with the figures in the test log (go test -v).
func replay(t *testing.T, ns string, from, to time.Time, extra ...string) *backtest.Result {
	t.Helper()
	res := backtestRun(t, ns, from, to, extra...)
	t.Logf("%s %s: %s", ns, strings.Join(extra, " "), summaryLine(res))
	return res
}

// TestBacktestRepeatWedges: discovery dies twice. Live, the first restart's
// replacement is a new pod, and the second wedge is its own: two restarts,
// nothing blocked, no restart-blocked page; the stop-gap also restarts twice,
// later.
func TestBacktestRepeatWedges(t *testing.T) {
	for _, mode := range [][]string{nil, {"--interval", "30s"}} {
		res := replay(t, "bt-repeat", base, base.Add(4*time.Hour), mode...)
		if len(res.Restarts) != 2 || len(res.Blocked) != 0 || slices.Contains(events(res), "restart-blocked/critical") {
			t.Errorf("%v: restarts %+v, blocked %d, alerts %v: want two restarts, none blocked", mode, res.Restarts, len(res.Blocked), events(res))
			continue
		}
		if res.Restarts[0].UID == res.Restarts[1].UID || res.Restarts[0].Evidence != "strong" || res.Restarts[1].Evidence != "strong" {
			t.Errorf("%v: restarts %+v, want two pods, both on strong evidence", mode, res.Restarts)
		}
		if res.Summary.Pages != 2 || len(res.Summary.Wedges) != 2 || res.Summary.WorstWedge.D() > 5*time.Minute {
			t.Errorf("%v: pages %d, wedges %+v: want 2 pages and two wedges healed within 5m", mode, res.Summary.Pages, res.Summary.Wedges)
		}
		if len(res.StopGap.Restarts) != 2 || res.StopGap.Summary.WorstWedge <= res.Summary.WorstWedge {
			t.Errorf("%v: stop-gap restarts %+v, worst %s vs the watchdog's %s: want 2, slower", mode, res.StopGap.Restarts, res.StopGap.Summary.WorstWedge.D(), res.Summary.WorstWedge.D())
		}
		if len(res.AsRecorded.Wedges) != 2 {
			t.Errorf("%v: as recorded %+v, want the two wedges", mode, res.AsRecorded.Wedges)
		}
	}
}

// TestBacktestGapInsideAWedge: a 39-minute wedge with a 5-minute scrape gap is
// one wedge with unknown time inside it, not two healed by themselves.
func TestBacktestGapInsideAWedge(t *testing.T) {
	res := replay(t, "bt-gapwedge", base, base.Add(3*time.Hour), "--max-restarts", "0")
	for name, s := range map[string]backtest.WorldSummary{"as recorded": res.AsRecorded, "watchdog (--max-restarts 0)": res.Summary.WorldSummary} {
		if len(s.Wedges) != 1 || s.Wedges[0].HealedBy != "itself" {
			t.Errorf("%s: wedges %+v, want one, healed by itself", name, s.Wedges)
			continue
		}
		within(t, name+": the wedge", s.Wedges[0].Duration.D(), 38*time.Minute, 40*time.Minute)
		within(t, name+": unknown inside it", s.Wedges[0].Unknown.D(), 4*time.Minute, 5*time.Minute)
	}
	if len(res.Restarts) != 0 || len(res.StopGap.Restarts) != 1 || len(res.StopGap.Summary.Wedges) != 1 || res.StopGap.Summary.Wedges[0].HealedBy != "restart" {
		t.Errorf("restarts %+v; stop-gap %+v, wedges %+v: want the stop-gap's one restart healing the one wedge", res.Restarts, res.StopGap.Restarts, res.StopGap.Summary.Wedges)
	}
}

// TestBacktestSparseKubeStateMetrics: kube-state-metrics every 60 s beside the
// scheduler's 15 s, over a start that is not on a scrape: the weak wedge is
// restarted once, "as recorded" keeps all its wedged time, and the report warns
// that the count is coarse.
func TestBacktestSparseKubeStateMetrics(t *testing.T) {
	res := replay(t, "bt-sparse", base.Add(7*time.Second+300*time.Millisecond).Truncate(time.Second), base.Add(3*time.Hour))
	if len(res.Restarts) != 1 || res.Restarts[0].Evidence != "weak" || len(res.Blocked) != 0 {
		t.Errorf("restarts %+v, blocked %d: want the weak wedge restarted once", res.Restarts, len(res.Blocked))
	}
	within(t, "as recorded: wedged", res.AsRecorded.Wedged.D(), 117*time.Minute, 119*time.Minute)
	if len(res.StopGap.Restarts) != 1 {
		t.Errorf("stop-gap restarts = %+v, want one", res.StopGap.Restarts)
	}
	if !slices.ContainsFunc(res.Warnings, func(w string) bool {
		return strings.Contains(w, "serving-node count") && strings.Contains(w, "every 1m, coarser than --sample-interval 15s")
	}) {
		t.Errorf("warnings = %q, want the coarse serving count named", res.Warnings)
	}
}

// TestBacktestWeakWedge: ready 0 with no rejected heartbeat: restarted once on
// weak evidence after --wedged-for; the stop-gap, at its second run reading 0.
func TestBacktestWeakWedge(t *testing.T) {
	res := replay(t, "bt-weak", base, base.Add(3*time.Hour))
	if len(res.Restarts) != 1 || res.Restarts[0].Evidence != "weak" || len(res.Blocked) != 0 {
		t.Fatalf("restarts %+v, blocked %d: want one on weak evidence", res.Restarts, len(res.Blocked))
	}
	// Seen by the run at +1h05m, restarted once it was wedged --wedged-for (2m30s).
	if want := base.Add(time.Hour + 7*time.Minute + 30*time.Second); !res.Restarts[0].At.Equal(want) {
		t.Errorf("restart at %s, want %s", res.Restarts[0].At, want)
	}
	if len(res.StopGap.Restarts) != 1 || !res.StopGap.Restarts[0].At.Equal(base.Add(time.Hour+10*time.Minute)) {
		t.Errorf("stop-gap restarts = %+v, want one at +1h10m", res.StopGap.Restarts)
	}
	if res.Summary.Wedged >= res.StopGap.Summary.Wedged {
		t.Errorf("wedged %s (watchdog) vs %s (stop-gap): want the watchdog shorter", res.Summary.Wedged.D(), res.StopGap.Summary.Wedged.D())
	}
}

// TestBacktestRollout: two pods during a rollout, the old one draining: live the
// old pod is terminating and not judged, so nothing is blocked or paged, and its
// drain is no wedge. The stop-gap, which knows no termination, reads its 0 once.
func TestBacktestRollout(t *testing.T) {
	res := replay(t, "bt-rollout", base, base.Add(3*time.Hour))
	if len(res.Blocked) != 0 || len(res.Restarts) != 0 || len(res.Pages) != 0 || len(res.Episodes) != 0 {
		t.Errorf("blocked %+v, restarts %+v, alerts %v, episodes %+v: want none", res.Blocked, res.Restarts, events(res), res.Episodes)
	}
	if res.Summary.Wedged != 0 || res.AsRecorded.Wedged != 0 || len(res.StopGap.Restarts) != 0 {
		t.Errorf("wedged %s (watchdog), %s (as recorded), stop-gap restarts %+v: want none", res.Summary.Wedged.D(), res.AsRecorded.Wedged.D(), res.StopGap.Restarts)
	}
	if !slices.ContainsFunc(res.Assumed, func(a string) bool { return strings.Contains(a, "not rolling out") }) {
		t.Errorf("assumed = %q, want the rollout state named", res.Assumed)
	}
}

// TestBacktestDefaultJudgePods: with the default --judge-pods deployment a
// wedged canary sharing the scheduler's labels is not judged (no restart, no
// page); with --judge-pods selector it is, and with two pods judged the
// single-target gate refuses. The stop-gap restarts the canary.
func TestBacktestDefaultJudgePods(t *testing.T) {
	res := replay(t, "bt-canary", base, base.Add(3*time.Hour))
	if len(res.Restarts) != 0 || len(res.Blocked) != 0 || res.Summary.Pages != 0 {
		t.Errorf("default: restarts %+v, blocked %d, pages %d: want the canary not judged", res.Restarts, len(res.Blocked), res.Summary.Pages)
	}
	if len(res.StopGap.Restarts) == 0 || !strings.Contains(res.StopGap.Restarts[0].Pod, "canary") {
		t.Errorf("stop-gap restarts = %+v, want the canary restarted", res.StopGap.Restarts)
	}
	// The summaries measure the scheduler, which the canary is not.
	if res.Summary.Wedged != 0 || res.AsRecorded.Wedged != 0 || res.StopGap.Summary.Wedged != 0 {
		t.Errorf("wedged %s (watchdog), %s (stop-gap), %s (as recorded): want 0, the scheduler was healthy",
			res.Summary.Wedged.D(), res.StopGap.Summary.Wedged.D(), res.AsRecorded.Wedged.D())
	}
	sel := replay(t, "bt-canary", base, base.Add(3*time.Hour), "--judge-pods", "selector")
	if len(sel.Restarts) != 0 || len(sel.Blocked) == 0 || sel.Blocked[0].Gates[0].Name != "single-target" {
		t.Errorf("selector: restarts %+v, blocked %+v: want the canary's restart refused by the single-target gate", sel.Restarts, sel.Blocked)
	}
}

// TestBacktestHA: three replicas, standbys reading 0 by design. With
// --leader-lease the leader is the pod kube-state-metrics records ready: the
// healthy two hours are quiet and the leader's wedge is restarted once. Without
// it, every pod is judged as a live run would, and the report says to pass
// --leader-lease.
func TestBacktestHA(t *testing.T) {
	res := replay(t, "bt-ha", base, base.Add(3*time.Hour), "--leader-lease", "agentenv-scheduler")
	if len(res.Restarts) != 1 || res.Restarts[0].Pod != sched+"l1e2a" || len(res.Blocked) != 0 {
		t.Errorf("restarts %+v, blocked %+v: want the leader restarted once, nothing blocked", res.Restarts, res.Blocked)
	}
	if got, want := events(res), []string{"wedged/critical", "restarted/warning", "recovered/info"}; !slices.Equal(got, want) {
		t.Errorf("alerts = %v, want %v", got, want)
	}
	if len(res.AsRecorded.Wedges) != 1 || res.AsRecorded.Wedges[0].From.Before(haWedgeAt()) || res.Summary.Wedged.D() > 5*time.Minute {
		t.Errorf("as recorded %+v, watchdog wedged %s: want only the leader's wedge", res.AsRecorded.Wedges, res.Summary.Wedged.D())
	}
	// The stop-gap restarts the standbys too: it knows no leader.
	if len(res.StopGap.Restarts) < 3 {
		t.Errorf("stop-gap restarts = %+v, want the two standbys and the leader", res.StopGap.Restarts)
	}
	without := replay(t, "bt-ha", base, base.Add(3*time.Hour))
	if !slices.ContainsFunc(without.Warnings, func(w string) bool { return strings.Contains(w, "pass --leader-lease") }) {
		t.Errorf("without --leader-lease: warnings %q, want --leader-lease named", without.Warnings)
	}
}

func haWedgeAt() time.Time { return base.Add(2*time.Hour + 2*time.Minute + 10*time.Second) }

// TestBacktestLeaderLeaseWithoutReadiness: --leader-lease on a history without
// the pods' readiness cannot tell the leader: refused, with a message naming
// what is missing.
func TestBacktestLeaderLeaseWithoutReadiness(t *testing.T) {
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := cli.ExecuteContext(ctx, []string{"backtest", "--prometheus-url", prom.URL, "-n", "bt-wedge", "--leader-lease", "agentenv-scheduler",
		"--start", base.Format(time.RFC3339), "--end", base.Add(3 * time.Hour).Format(time.RFC3339)}, &stdout, &stderr)
	if code == 0 || !strings.Contains(stderr.String(), "--leader-lease") || !strings.Contains(stderr.String(), "kube_pod_status_ready") {
		t.Errorf("exit %d, stderr:\n%s\nwant a refusal naming --leader-lease and kube_pod_status_ready", code, stderr.String())
	}
}
