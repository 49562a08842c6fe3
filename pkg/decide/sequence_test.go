package decide_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/watchdog/internal/podtest"
	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/endpoints"
	"github.com/agentenv/watchdog/pkg/scrape"
	"github.com/agentenv/watchdog/pkg/state"
)

// Sequence tests: hours of runs against the pure core with an injected clock, for
// the messy cases (failed runs, overlapping runs, flaps, restarts that do not help).

// run simulates one pass as pkg/check runs it: samples every DefaultSampleInterval
// from start while the pass's sampling rule (Target.SamplesOn) says sampling on can
// make a restart due within budget (the pass's time left), then returns the state
// and the last decision. at gives the observation at a time.
func run(cfg decide.Config, s *state.State, start time.Time, budget time.Duration, at func(time.Time) decide.Observation) (*state.State, decide.Result, int) {
	samples := 0
	var r decide.Result
	for now := start; ; now = now.Add(decide.DefaultSampleInterval) {
		s, r = decide.Decide(inRun(start, at(now)), s, cfg)
		samples++
		more := false
		for _, t := range r.Targets {
			if t.SamplesOn(decide.DefaultSampleInterval, budget-now.Sub(start)) {
				more = true
			}
		}
		if !more {
			decide.CountRun(s, r.Verdict)
			return s, r, samples
		}
	}
}

func scrapeFails(at time.Time) decide.Observation {
	p := schedPod("sched-a", "uid-a", nil)
	p.ScrapeErr = &scrape.Error{Kind: scrape.KindTimeout, Err: errors.New("context deadline exceeded")}
	return observe(at, 3, p)
}

func wedgedAt(at time.Time) decide.Observation {
	return observe(at, 3, schedPod("sched-a", "uid-a", podtest.Sample(0, 0)))
}

// A run that could not list the pods observed nothing. Its gap must not be
// counted: it pauses the clock exactly as an unknown does.
func TestFailedRunPausesTheWedgeClock(t *testing.T) {
	cfg := testConfig()
	s, r := decide.Decide(wedgedAt(t0), state.New(), cfg)
	if r.Action != state.ActionWait {
		t.Fatalf("first sight: %s", r.Action)
	}
	failed := s.Clone()
	decide.RunFailed(failed) // t0+5m: the pod list could not be read
	s, r = decide.Decide(wedgedAt(t0.Add(10*time.Minute)), failed, cfg)
	if got := r.Targets[0].BadFor.D(); got != 0 {
		t.Fatalf("wedged for %s after a failed run: the ten minutes without information were counted", got)
	}
	if !s.Pods["uid-a"].Episode.Since.Equal(t0) {
		t.Errorf("the episode must be kept (it began at t0): %v", s.Pods["uid-a"].Episode.Since)
	}

	// The same with strong evidence: confirmation starts over after the failed run.
	cfg.ConfirmWindow = 90 * time.Second
	strong := func(at time.Time, rejected uint64) decide.Observation {
		return observe(at, 3, schedPod("sched-a", "uid-a", podtest.Sample(0, rejected)))
	}
	s, _ = decide.Decide(strong(t0, 3), state.New(), cfg)
	s, _ = decide.Decide(strong(t0.Add(15*time.Second), 6), s, cfg)
	failed = s.Clone()
	decide.RunFailed(failed)
	_, r = decide.Decide(inRun(t0.Add(15*time.Second), strong(t0.Add(2*time.Minute), 9)), failed, cfg)
	if r.Action == state.ActionRestart {
		t.Fatalf("a strong confirmation must not span a failed run: %s", r.Reason)
	}
}

// Outside a merge, a record dated in the future (a run on a node whose clock is an
// hour ahead) is clock skew, not news: the pod is judged as usual, and a wedge is
// not hidden behind the future record (found by review).
func TestFutureRecordDoesNotHideAWedge(t *testing.T) {
	cfg := testConfig()
	s, _ := decide.Decide(observe(t0.Add(time.Hour), 3, schedPod("sched-a", "uid-a", podtest.Sample(3, 0))), state.New(), cfg)
	s, r := decide.Decide(wedgedAt(t0), s, cfg)
	if r.Verdict != state.VerdictWedged {
		t.Fatalf("a future record hid the wedge: %s %s", r.Verdict, r.Reason)
	}
	s, _ = decide.Decide(wedgedAt(t0.Add(5*time.Minute)), s, cfg)
	_, r = decideRun(cfg, s, t0.Add(10*time.Minute), wedgedAt)
	if r.Action != state.ActionRestart {
		t.Errorf("the wedge behind a future record never became due: %s %s", r.Action, r.Reason)
	}
}

// The "confirmed in two runs" path chains across whole runs that could not see
// the scheduler, never across one failed sample inside a confirmed run: that would
// skip --wedged-for (found by review).
func TestOneFailedSampleDoesNotChainConfirmedRuns(t *testing.T) {
	cfg := testConfig()
	cfg.WedgedFor = 30 * time.Minute
	s, _, _ := run(cfg, state.New(), t0, 170*time.Second, wedgedAt) // confirmed in-run
	// One scrape fails late in the same run, then the run ends.
	s, _ = decide.Decide(inRun(t0, scrapeFails(t0.Add(105*time.Second))), s, cfg)
	decide.CountRun(s, state.VerdictWedged)
	_, r, _ := run(cfg, s, t0.Add(5*time.Minute), 170*time.Second, wedgedAt)
	if r.Action == state.ActionRestart {
		t.Fatalf("restarted by chaining across one failed sample: %s", r.Reason)
	}
}

// A pod started long after a restart is no replacement of it: its wedge says
// nothing about whether that restart helped (found by review).
func TestOldRestartIsNotIneffective(t *testing.T) {
	cfg := testConfig()
	cfg.IneffectiveWithin, cfg.BackoffBase, cfg.BackoffMax, cfg.BackoffReset = 15*time.Minute, 10*time.Minute, time.Hour, time.Hour
	old := t0.Add(-72 * time.Hour)
	s := state.New()
	s.Restarts = []state.Restart{{Pod: "sched-0", UID: "uid-0", Method: decide.MethodDelete, ClaimedAt: old, DoneAt: &old, Outcome: state.RestartDone}}
	p := func(at time.Time) decide.Observation {
		pod := schedPod("sched-1", "uid-1", podtest.Sample(0, 0))
		pod.StartedAt = t0.Add(-10 * time.Minute)
		return observe(at, 3, pod)
	}
	s, _ = decide.Decide(p(t0), s, cfg)
	_, r := decideRun(cfg, s, t0.Add(5*time.Minute), p)
	if r.Targets[0].Ineffective != "" || r.Action != state.ActionRestart {
		t.Fatalf("a restart three days old was judged ineffective: %s %s", r.Action, r.Reason)
	}
}

// A negative count must not crash the back-off (found by review).
func TestNegativeIneffectiveCountDoesNotPanic(t *testing.T) {
	cfg := testConfig()
	cfg.IneffectiveWithin, cfg.BackoffBase, cfg.BackoffMax = 15*time.Minute, 10*time.Minute, time.Hour
	claimed := t0.Add(-time.Minute)
	st := state.New()
	st.Backoff = &state.Backoff{Ineffective: -3}
	st.Restarts = []state.Restart{{Pod: "sched-0", UID: "uid-0", ClaimedAt: claimed, DoneAt: &claimed, Outcome: state.RestartDone}}
	p := func(at time.Time) decide.Observation {
		pod := schedPod("sched-1", "uid-1", podtest.Sample(0, 0))
		pod.StartedAt = t0
		return observe(at, 3, pod)
	}
	st, _ = decide.Decide(p(t0.Add(3*time.Minute)), st, cfg)
	decideRun(cfg, st, t0.Add(8*time.Minute), p) // must not panic
}

// The watchdog's own rollout restart keeps the Deployment mid-rollout while the
// old pod still runs: that refusal is part of the restart in progress, not a
// blocked restart to page (found by review).
func TestOwnRolloutIsNotABlockedRestart(t *testing.T) {
	cfg := testConfig()
	cfg.RestartMethod = decide.MethodRollout
	o := func(at time.Time) decide.Observation {
		ob := wedgedAt(at)
		ob.Rollout = &decide.Rollout{Name: "agentenv-scheduler", Found: true, InProgress: true, Detail: "1 of 1 updated, 1 old replica"}
		return ob
	}
	s, _ := decide.Decide(o(t0), state.New(), cfg)
	done := t0.Add(4*time.Minute + 30*time.Second)
	s.Restarts = append(s.Restarts, state.Restart{Pod: "sched-a", UID: "uid-a", Method: decide.MethodRollout, ClaimedAt: done, DoneAt: &done, Outcome: state.RestartDone})
	_, r := decideRun(cfg, s, t0.Add(5*time.Minute), o)
	if r.Action != state.ActionBlocked || !r.Targets[0].RestartInProgress() {
		t.Fatalf("%s inProgress=%v: %s", r.Action, r.Targets[0].RestartInProgress(), r.Reason)
	}
}

// The back-off ends only after an unbroken hour of healthy observations: an
// unknown in between starts the hour over (found by review).
func TestBackoffNeedsAnUnbrokenHealthyHour(t *testing.T) {
	cfg := testConfig()
	cfg.BackoffReset = time.Hour
	s := state.New()
	s.Backoff = &state.Backoff{Ineffective: 2}
	healthy := func(at time.Time) decide.Observation {
		return observe(at, 3, schedPod("sched-a", "uid-a", podtest.Sample(3, 0)))
	}
	s, _ = decide.Decide(healthy(t0), s, cfg)
	s, _ = decide.Decide(scrapeFails(t0.Add(30*time.Minute)), s, cfg)
	s, _ = decide.Decide(healthy(t0.Add(61*time.Minute)), s, cfg)
	if s.Backoff == nil {
		t.Fatal("the back-off ended after two healthy observations an hour apart with an unknown between")
	}
	s, _ = decide.Decide(healthy(t0.Add(122*time.Minute)), s, cfg)
	if s.Backoff != nil {
		t.Error("an unbroken healthy hour must end the back-off")
	}
}

// A wedge seen only every other run (the other runs cannot scrape) must be
// healed and escalated, not paused forever. Two hours of alternating runs.
func TestWedgeSeenEveryOtherRunIsHealedAndBlind(t *testing.T) {
	cfg := testConfig()
	cfg.WedgedFor = 30 * time.Minute // the duration path alone would need many runs
	const blindAfter = 3
	s := state.New()
	restartAt := time.Duration(-1)
	blindAt := time.Duration(-1)
	for i := 0; i < 24; i++ { // 2 h of */5 runs
		start := t0.Add(time.Duration(i) * 5 * time.Minute)
		at := wedgedAt
		if i%2 == 1 {
			at = scrapeFails
		}
		var r decide.Result
		s, r, _ = run(cfg, s, start, 170*time.Second, at)
		if r.Action == state.ActionRestart && restartAt < 0 {
			restartAt = start.Sub(t0)
			if !strings.Contains(r.Reason, "confirmed in 2 runs separated only by runs that could not see the scheduler") {
				t.Errorf("restart reason: %s", r.Reason)
			}
		}
		if s.ConsecutiveUnknownRuns >= blindAfter && blindAt < 0 {
			blindAt = start.Sub(t0)
		}
	}
	if restartAt != 10*time.Minute {
		t.Errorf("restart at +%s, want +10m (the second run that confirms the wedge in-run)", restartAt)
	}
	if blindAt != 25*time.Minute {
		t.Errorf("blind at +%s, want +25m (the third unknown run, not reset by the wedged runs between)", blindAt)
	}
}

// Single-sample wedged runs between unknowns (a run that cannot sample on, say its
// deadline is short) confirm nothing and restart nothing, but still end up blind.
func TestAlternatingSingleSamplesNeverRestartButGoBlind(t *testing.T) {
	cfg := testConfig()
	s := state.New()
	for i := 0; i < 24; i++ {
		at := wedgedAt
		if i%2 == 1 {
			at = scrapeFails
		}
		var r decide.Result
		s, r = decide.Decide(at(t0.Add(time.Duration(i)*5*time.Minute)), s, cfg)
		decide.CountRun(s, r.Verdict)
		if r.Action == state.ActionRestart {
			t.Fatalf("run %d restarted on single samples: %s", i, r.Reason)
		}
	}
	if s.ConsecutiveUnknownRuns != 12 {
		t.Errorf("unknown runs %d, want 12: the wedged runs between must not reset the count", s.ConsecutiveUnknownRuns)
	}
}

// The CronJob's weak path with the defaults: the first run that sees the wedge
// samples on and restarts once --wedged-for (2m30s) has held inside it.
func TestWeakWedgeRestartsInTheFirstRunWithTheDefaults(t *testing.T) {
	cfg := testConfig()
	cfg.WedgedFor = 150 * time.Second
	s, _ := decide.Decide(observe(t0.Add(-5*time.Minute), 3, schedPod("sched-a", "uid-a", podtest.Sample(3, 0))), state.New(), cfg)
	s, r, samples := run(cfg, s, t0, 170*time.Second, wedgedAt)
	if r.Action != state.ActionRestart || samples != 11 {
		t.Fatalf("%s after %d samples (%s), want a restart after 2m30s of samples", r.Action, samples, r.Reason)
	}
	if !strings.Contains(r.Reason, "wedged 2m30s ≥ 2m30s, ready 0 throughout 2m30s") {
		t.Errorf("reason: %s", r.Reason)
	}
	_ = s
	// With a shorter run budget it cannot, and waits for the next run instead.
	s2, _ := decide.Decide(observe(t0.Add(-5*time.Minute), 3, schedPod("sched-a", "uid-a", podtest.Sample(3, 0))), state.New(), cfg)
	_, r, samples = run(cfg, s2, t0, 60*time.Second, wedgedAt)
	if r.Action != state.ActionWait || samples != 1 {
		t.Fatalf("%s after %d samples, want wait after one sample", r.Action, samples)
	}
}

// A restart whose replacement wedges again soon after it started did not
// help. The watchdog backs off (doubling, capped), says so once as
// restart-ineffective, and forgets it after a healthy hour. Hours of runs.
func TestIneffectiveRestartsBackOff(t *testing.T) {
	cfg := testConfig()
	cfg.MaxRestarts, cfg.RestartWindow = 100, time.Hour // the budget alone would not stop this
	cfg.IneffectiveWithin, cfg.BackoffBase, cfg.BackoffMax, cfg.BackoffReset = 15*time.Minute, 10*time.Minute, 40*time.Minute, time.Hour
	cfg.WedgedFor = 150 * time.Second

	// The cause is outside the scheduler: every process wedges 2m30s after start.
	type proc struct {
		name, uid string
		start     time.Time
	}
	cur := proc{"sched-0", "uid-0", t0.Add(-time.Hour)}
	healthyUntil := time.Time{} // zero: wedged once past startup grace
	n := 1
	at := func(now time.Time) decide.Observation {
		p := schedPod(cur.name, cur.uid, podtest.Sample(0, 0))
		if now.Before(healthyUntil) {
			p.Sample = podtest.Sample(3, 0)
		}
		p.StartedAt = cur.start
		return observe(now, 3, p)
	}
	s := state.New()
	var restarts []time.Duration
	var ineffective []time.Duration
	for i := 0; i < 48; i++ { // 4 h of */5 runs
		start := t0.Add(time.Duration(i) * 5 * time.Minute)
		var r decide.Result
		s, r, _ = run(cfg, s, start, 170*time.Second, at)
		for _, tg := range r.Targets {
			if tg.Ineffective != "" && (len(ineffective) == 0 || ineffective[len(ineffective)-1] != start.Sub(t0)) {
				ineffective = append(ineffective, start.Sub(t0))
				if tg.Action == state.ActionBlocked && !tg.OnlyBackoff() {
					t.Errorf("a restart held back by the back-off alone must not be restart-blocked: %+v", tg.Gates)
				}
			}
		}
		if r.Action == state.ActionRestart {
			restarts = append(restarts, start.Sub(t0))
			// Carry it out as pkg/check does: record done, a replacement starts.
			now := start.Add(150 * time.Second)
			s.Restarts = append(s.Restarts, state.Restart{Pod: cur.name, UID: cur.uid, Method: decide.MethodDelete, ClaimedAt: now, DoneAt: &now, Outcome: state.RestartDone})
			cur = proc{name: "sched-" + string(rune('0'+n)), uid: "uid-" + string(rune('0'+n)), start: now.Add(10 * time.Second)}
			n++
			if i >= 30 {
				healthyUntil = t0.Add(100 * time.Hour) // the cause was fixed: the next one stays healthy
			}
		}
	}
	// First restart at +0 (first run), its replacement wedges → ineffective: wait
	// 10m from that restart; then 20m, then 40m (cap).
	want := []time.Duration{0, 15 * time.Minute, 40 * time.Minute, 85 * time.Minute, 130 * time.Minute}
	if len(restarts) < len(want) {
		t.Fatalf("restarts at %v, want at least %v", restarts, want)
	}
	for i, w := range want {
		if restarts[i] != w {
			t.Fatalf("restarts at %v, want %v...", restarts, want)
		}
	}
	if len(ineffective) == 0 {
		t.Fatal("no target said the restart was ineffective")
	}
	if s.Backoff == nil && restarts[len(restarts)-1] > 3*time.Hour {
		t.Error("the back-off ended before an hour of health")
	}
	// After an hour of health past the fixing restart, the back-off is gone.
	last := restarts[len(restarts)-1]
	s2 := s
	for i := 0; i < 14; i++ {
		now := t0.Add(last + time.Duration(i+1)*5*time.Minute + 3*time.Minute)
		s2, _ = decide.Decide(at(now), s2, cfg)
	}
	if s2.Backoff != nil {
		t.Errorf("the back-off must end after an hour of health: %+v", s2.Backoff)
	}
}

// A restart already done or under way is not a blocked restart.
func TestRestartInProgressIsNotBlocked(t *testing.T) {
	cfg := testConfig()
	plain := func(at time.Time) decide.Observation {
		return observe(at, 3, schedPod("sched-a", "uid-a", podtest.Sample(0, 0)))
	}
	first, _ := decide.Decide(plain(t0), state.New(), cfg)

	// Another run claimed it a moment ago (the loser of a claim race).
	claimed := first.Clone()
	claimed.Restarts = append(claimed.Restarts, state.Restart{Pod: "sched-a", UID: "uid-a", ClaimedAt: t0.Add(6 * time.Minute), Outcome: state.RestartClaimed})
	_, r := decideRun(cfg, claimed, t0.Add(5*time.Minute), plain)
	if r.Action != state.ActionBlocked || !r.Targets[0].RestartInProgress() || !strings.Contains(r.Reason, "restart already in progress") {
		t.Fatalf("%s inProgress=%v: %s", r.Action, r.Targets[0].RestartInProgress(), r.Reason)
	}

	// Done (rollout: the old pod runs on while the replacement starts).
	done := first.Clone()
	doneAt := t0.Add(5*time.Minute + 30*time.Second)
	done.Restarts = append(done.Restarts, state.Restart{Pod: "sched-a", UID: "uid-a", Method: decide.MethodRollout, ClaimedAt: doneAt, DoneAt: &doneAt, Outcome: state.RestartDone})
	_, r = decideRun(cfg, done, t0.Add(5*time.Minute+45*time.Second), plain)
	if !r.Targets[0].RestartInProgress() {
		t.Fatalf("a replacement within its startup grace: %s", r.Reason)
	}
	// Past the replacement's grace and confirm window the old pod is still here and
	// wedged: now it is a blocked restart, and pages.
	_, r = decideRun(cfg, done, doneAt.Add(cfg.StartupGrace+cfg.ConfirmWindow), plain)
	if r.Action != state.ActionBlocked || r.Targets[0].RestartInProgress() || !strings.Contains(r.Reason, "did not replace it") {
		t.Fatalf("%s inProgress=%v: %s", r.Action, r.Targets[0].RestartInProgress(), r.Reason)
	}
}

// A restart is made only on a consistent read.
func TestRestartNeedsAConsistentRead(t *testing.T) {
	cfg := testConfig()
	cached := func(at time.Time) decide.Observation { o := wedgedAt(at); o.Consistent = false; return o }
	s, _ := decide.Decide(cached(t0), state.New(), cfg)
	_, r := decideRun(cfg, s, t0.Add(5*time.Minute), cached)
	if r.Action != state.ActionBlocked || !r.NeedConsistentRead || !r.Targets[0].RestartInProgress() {
		t.Fatalf("%s need=%v: %s", r.Action, r.NeedConsistentRead, r.Reason)
	}
	failing := func(at time.Time) decide.Observation {
		o := cached(at)
		o.ConsistentErr = errors.New("etcd leader changed")
		return o
	}
	_, r = decideRun(cfg, s, t0.Add(5*time.Minute), failing)
	if r.Action != state.ActionBlocked || r.NeedConsistentRead || r.Targets[0].RestartInProgress() || !strings.Contains(r.Reason, "etcd leader changed") {
		t.Fatalf("a failed consistent read must block, visibly: %s need=%v: %s", r.Action, r.NeedConsistentRead, r.Reason)
	}
	// It is a failed sample: worth sampling on to read again while one fits.
	if sf := r.Targets[0].SampleFor; sf == nil || *sf != 0 {
		t.Errorf("a failed consistent read must ask to sample on and read again: SampleFor %v", sf)
	}
	// A healthy run needs none.
	_, r = decide.Decide(observe(t0, 3, schedPod("sched-a", "uid-a", podtest.Sample(3, 0))), state.New(), cfg)
	if r.NeedConsistentRead {
		t.Error("a healthy run asked for a consistent read")
	}
}

// A watch that never delivered an event has an age of years: strong
// evidence, not an overflowed duration.
func TestHugeWatchAgeIsStrongEvidence(t *testing.T) {
	cfg := testConfig()
	cfg.MaxWatchAge = 10 * time.Minute
	for _, age := range []float64{1.7e9, 1e12, 1e300} {
		p := schedPod("sched-a", "uid-a", podtest.Sample(0, 0))
		a := age
		p.Sample.WatchAge = &a
		_, r := decide.Decide(observe(t0, 3, p), state.New(), cfg)
		if r.Targets[0].Evidence != state.EvidenceStrong || !strings.Contains(r.Reason, "saw no event for") {
			t.Errorf("age %g s: evidence %q, reason %s", age, r.Targets[0].Evidence, r.Reason)
		}
	}
}

// Ready above the serving nodes listed is a doubt worth saying.
func TestReadyAboveServingIsAWarning(t *testing.T) {
	cfg := testConfig()
	o := observe(t0, 2, schedPod("sched-a", "uid-a", podtest.Sample(5, 0)))
	_, r := decide.Decide(o, state.New(), cfg)
	if r.Verdict != state.VerdictHealthy || len(r.Targets[0].Warnings) != 1 || !strings.Contains(r.Targets[0].Warnings[0], "5 ready node(s) but the API server lists only 2") {
		t.Fatalf("%s %q", r.Verdict, r.Targets[0].Warnings)
	}
	o = observe(t0, 5, schedPod("sched-a", "uid-a", podtest.Sample(5, 0)))
	if _, r = decide.Decide(o, state.New(), cfg); len(r.Targets[0].Warnings) != 0 {
		t.Errorf("no warning when the counts agree: %q", r.Targets[0].Warnings)
	}
}

// The misconfiguration checks of the counter the observation carries.
func TestMisconfiguredServiceIsUnknown(t *testing.T) {
	cfg := testConfig()
	for _, c := range []struct {
		count endpoints.Count
		flag  string
	}{
		{endpoints.Count{}, "--nodes-service"},
		{endpoints.Count{AllSlices: 2, OtherPorts: []int32{9000}}, "--nodes-port"},
	} {
		err := c.count.Check("agentenv-system", "agentenv-nodes", 8000)
		o := observe(t0, 0, schedPod("sched-a", "uid-a", podtest.Sample(0, 0)))
		o.Expected, o.ExpectedErr = c.count, err
		_, r := decide.Decide(o, state.New(), cfg)
		if r.Verdict != state.VerdictUnknown || !strings.Contains(r.Reason, c.flag) {
			t.Errorf("%+v: %s %s", c.count, r.Verdict, r.Reason)
		}
	}
	// A Service with no endpoints at all (placeholder slice, no ports) is no-nodes.
	if err := (endpoints.Count{AllSlices: 1}).Check("ns", "svc", 8000); err != nil {
		t.Errorf("a placeholder slice is not a misconfiguration: %v", err)
	}
}

// A strong confirmation cut short by one run's deadline is not carried into the
// next run: that run confirms again rather than restart on its first sample (the
// same rule as the duration path: every restart is confirmed inside its run).
func TestStrongConfirmationDoesNotSpanRuns(t *testing.T) {
	cfg := testConfig()
	cfg.WedgedFor = time.Hour // the strong path alone
	strong := func(rejected uint64) func(time.Time) decide.Observation {
		return func(at time.Time) decide.Observation {
			return observe(at, 3, schedPod("sched-a", "uid-a", podtest.Sample(0, rejected)))
		}
	}
	s, _ := decide.Decide(observe(t0.Add(-5*time.Minute), 3, schedPod("sched-a", "uid-a", podtest.Sample(3, 0))), state.New(), cfg)
	// Run 1 sees strong evidence for 60 s, then its deadline ends the run.
	var r decide.Result
	for d := time.Duration(0); d <= time.Minute; d += decide.DefaultSampleInterval {
		s, r = decide.Decide(inRun(t0, strong(uint64(3+d/time.Second))(t0.Add(d))), s, cfg)
	}
	if r.Action != state.ActionWait {
		t.Fatalf("run 1: %s", r.Action)
	}
	// Run 2, five minutes later: strong evidence has been there 5m by the clock,
	// but this run has seen it for one sample.
	second := t0.Add(5 * time.Minute)
	s, r = decide.Decide(inRun(second, strong(100)(second)), s, cfg)
	if r.Action == state.ActionRestart {
		t.Fatalf("restarted on the first sample of a new run: %s", r.Reason)
	}
	if d := r.Targets[0].SampleFor; d == nil || *d != cfg.ConfirmWindow {
		t.Errorf("sample for %v, want the whole confirm window", d)
	}
	_, r = decideRun(cfg, s, second, strong(110))
	if r.Action != state.ActionRestart || !strings.Contains(r.Reason, "strong evidence held 1m30s") {
		t.Fatalf("confirmed over this run's window: %s %s", r.Action, r.Reason)
	}
}

// Pod timestamps have whole seconds: a replacement that started in the very second
// of the restart's claim is its replacement (found on the real API server).
func TestReplacementStartedInTheClaimSecond(t *testing.T) {
	cfg := testConfig()
	cfg.IneffectiveWithin, cfg.BackoffBase, cfg.BackoffMax, cfg.BackoffReset = 15*time.Minute, 10*time.Minute, time.Hour, time.Hour
	claimed := t0.Add(400 * time.Millisecond)
	s := state.New()
	s.Restarts = []state.Restart{{Pod: "sched-0", UID: "uid-0", Method: decide.MethodDelete, ClaimedAt: claimed, DoneAt: &claimed, Outcome: state.RestartDone}}
	p := func(at time.Time) decide.Observation {
		pod := schedPod("sched-1", "uid-1", podtest.Sample(0, 0))
		pod.StartedAt = t0 // truncated to the second by the API server
		return observe(at, 3, pod)
	}
	s, _ = decide.Decide(p(t0.Add(3*time.Minute)), s, cfg)
	_, r := decideRun(cfg, s, t0.Add(8*time.Minute), p)
	if r.Targets[0].Ineffective == "" || !r.Targets[0].OnlyBackoff() {
		t.Fatalf("the replacement was not recognised: %s %s", r.Action, r.Reason)
	}
}

// Runs the CronJob controller skips (startingDeadlineSeconds during a control-plane
// upgrade) leave no observation. The clock counts the gap as it
// counts any time between two runs that saw the same wedge, but the first run after
// the gap restarts only once its own samples confirmed the wedge for the confirm
// window: a weak wedge seen before a gap of 2-6 skipped runs waits through the
// confirm window of the run after it, whatever the gap.
func TestSkippedRunsConfirmInTheRunAfterThem(t *testing.T) {
	cfg := testConfig()
	for skipped := 2; skipped <= 6; skipped++ {
		s, r := decide.Decide(wedgedAt(t0), state.New(), cfg)
		if r.Action != state.ActionWait {
			t.Fatalf("first sight: %s", r.Action)
		}
		after := t0.Add(time.Duration(skipped+1) * 5 * time.Minute)
		runSteps(t, cfg, s, confirmedRun(cfg, after, wedgedAt, step{verdict: state.VerdictWedged, action: state.ActionRestart, check: func(t *testing.T, s *state.State, r decide.Result) {
			if got, want := r.Targets[0].BadFor.D(), after.Add(cfg.ConfirmWindow).Sub(t0); got != want {
				t.Errorf("%d runs skipped: wedged for %s, want the gap counted (%s)", skipped, got, want)
			}
		}}))
	}
}

// A failed sample between two samples whose accepted and rejected heartbeat
// counters both still read their values at the episode's first bad sample is
// bridged: nothing reached the scheduler, so ready cannot have risen. The gap
// counts on the wedge clock and the in-run confirmation goes on; across runs,
// this run's confirmation counts from its first (failed) sample. A moved
// accepted counter (a heal under way) or rejected one (a flap) is not bridged.
// Checked before the bridge: every case started the confirmation over.
func TestFailedSampleBridgedWhileTheCountersStandStill(t *testing.T) {
	cfg := testConfig()
	wedged := func(ok, rejected uint64) func(time.Time) decide.Observation {
		return func(at time.Time) decide.Observation {
			s := podtest.Sample(0, rejected)
			s.HeartbeatOK = ok
			return observe(at, 3, schedPod("sched-a", "uid-a", s))
		}
	}
	for _, tc := range []struct {
		name string
		// after is the sample after the gap; nextRun: the gap ends the run and the
		// sample after it is the next run's second.
		after   func(time.Time) decide.Observation
		nextRun bool
		bridged bool
	}{
		{name: "counters still", after: wedged(1000, 7), bridged: true},
		{name: "accepted counter moved", after: wedged(1003, 7)},
		{name: "rejected counter moved", after: wedged(1000, 8)},
		{name: "counters still, across runs", after: wedged(1000, 7), nextRun: true, bridged: true},
		{name: "accepted counter moved, across runs", after: wedged(1000+3, 7), nextRun: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := state.New()
			before := wedged(1000, 7)
			healthy := podtest.Sample(3, 7)
			healthy.HeartbeatOK = 990
			s, _ = decide.Decide(observe(t0.Add(-5*time.Minute), 3, schedPod("sched-a", "uid-a", healthy)), s, cfg) // the previous run
			s, _ = decide.Decide(before(t0), s, cfg)                                                                // the episode's first sample
			s, _ = decide.Decide(inRun(t0, before(t0.Add(decide.DefaultSampleInterval))), s, cfg)
			gapRun, gapAt, afterAt := t0, t0.Add(30*time.Second), t0.Add(45*time.Second)
			if tc.nextRun {
				gapRun, gapAt, afterAt = t0.Add(5*time.Minute), t0.Add(5*time.Minute), t0.Add(5*time.Minute+decide.DefaultSampleInterval)
			}
			s, _ = decide.Decide(inRun(gapRun, scrapeFails(gapAt)), s, cfg)
			s, r := decide.Decide(inRun(gapRun, tc.after(afterAt)), s, cfg)
			e := s.Pods["uid-a"].Episode
			wantFor := 15 * time.Second
			if tc.bridged {
				wantFor = afterAt.Sub(t0)
			}
			if e.For.D() != wantFor {
				t.Errorf("wedge clock %s, want %s: %s", e.For.D(), wantFor, r.Reason)
			}
			wantSince := afterAt
			if tc.bridged {
				wantSince = gapRun
			}
			if !e.RunSince.Equal(wantSince) {
				t.Errorf("in-run streak since +%s, want +%s", e.RunSince.Sub(t0), wantSince.Sub(t0))
			}
		})
	}
}

// `watchdog run` looks every 30 s. Nodes rejected by a dead discovery back off to
// one heartbeat a minute, so at the first sight of ready 0 the rejected counter
// can read what it read one pass earlier: judged against that reading alone the
// first sight was weak, and the strong confirmation began a pass or more later.
// Judged also against a reading at least two back-off caps (2 min) old, it is
// strong at first sight whenever the nodes were rejected in that span, and weak
// when nobody called in. Checked before: weak at first sight, every case.
func TestFirstSightJudgedAgainstAReadingTwoBackoffCapsOld(t *testing.T) {
	cfg := testConfig()
	for _, tc := range []struct {
		name     string
		rejected func(d time.Duration) uint64 // rejected count d after t0
		want     state.Evidence
	}{
		// Rejections 60 s apart, the last one 50 s before first sight.
		{"rejected a minute apart", func(d time.Duration) uint64 { return 10 + 3*uint64(max(d-10*time.Second, 0)/time.Minute) }, state.EvidenceStrong},
		{"nobody calling in", func(time.Duration) uint64 { return 10 }, state.EvidenceWeak},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := state.New()
			at := func(d time.Duration, ready int) decide.Observation {
				return observe(t0.Add(d), 3, schedPod("sched-a", "uid-a", podtest.Sample(ready, tc.rejected(d))))
			}
			for d := time.Duration(0); d < 4*time.Minute; d += 30 * time.Second {
				s, _ = decide.Decide(at(d, 3), s, cfg) // healthy passes; ready reads N until the gauge catches up
			}
			_, r := decide.Decide(at(4*time.Minute, 0), s, cfg)
			if got := r.Targets[0].Evidence; r.Verdict != state.VerdictWedged || got != tc.want {
				t.Errorf("first sight: %s, %s evidence, want %s: %s", r.Verdict, got, tc.want, r.Reason)
			}
		})
	}
}
