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

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func testConfig() decide.Config {
	return decide.Config{
		StartupGrace:  2 * time.Minute,
		WedgedFor:     4 * time.Minute,
		ConfirmWindow: 90 * time.Second,
		MaxRestarts:   3,
		RestartWindow: time.Hour,
		RestartMethod: decide.MethodDelete,
		ClaimTimeout:  3 * time.Minute,
	}
}

// started is the container start used by default: well past the startup grace.
var started = t0.Add(-time.Hour)

// schedPod is podtest's scheduler pod, started at started, with its UID and scrape.
func schedPod(name, uid string, s *scrape.Sample) decide.Pod {
	return podtest.Pod(name, started, podtest.UID(uid), func(p *decide.Pod) { p.Sample = s })
}

// observe is one observation that is a run of its own (RunStart = at), with
// consistent lists; inRun puts an observation inside an earlier run.
func observe(at time.Time, expected int, pods ...decide.Pod) decide.Observation {
	return decide.Observation{
		At:         at,
		RunStart:   at,
		Expected:   endpoints.Count{Serving: expected, AllSlices: 1, Slices: 1},
		Pods:       pods,
		Rollout:    &decide.Rollout{Name: "agentenv-scheduler", Found: true},
		Consistent: true,
	}
}

func inRun(start time.Time, o decide.Observation) decide.Observation {
	o.RunStart = start
	return o
}

// confirmedRun is one run starting at start that samples every
// DefaultSampleInterval for the confirm window, as a run does while a restart
// becomes due: every sample but the last waits, the last is want (its obs is
// filled in).
func confirmedRun(cfg decide.Config, start time.Time, at func(time.Time) decide.Observation, want step) []step {
	var steps []step
	for d := time.Duration(0); d < cfg.ConfirmWindow; d += decide.DefaultSampleInterval {
		steps = append(steps, step{obs: inRun(start, at(start.Add(d))), verdict: want.verdict, action: state.ActionWait})
	}
	want.obs = inRun(start, at(start.Add(cfg.ConfirmWindow)))
	return append(steps, want)
}

// decideRun decides the samples of one such run and returns the last decision.
func decideRun(cfg decide.Config, s *state.State, start time.Time, at func(time.Time) decide.Observation) (*state.State, decide.Result) {
	var r decide.Result
	for d := time.Duration(0); d <= cfg.ConfirmWindow; d += decide.DefaultSampleInterval {
		s, r = decide.Decide(inRun(start, at(start.Add(d))), s, cfg)
	}
	return s, r
}

// step is one run: an observation and what the decision must say.
type step struct {
	obs        decide.Observation
	verdict    state.Verdict
	action     state.Action
	reasonHas  string
	confirming bool
	check      func(t *testing.T, s *state.State, r decide.Result)
}

func runSteps(t *testing.T, cfg decide.Config, prev *state.State, steps []step) *state.State {
	t.Helper()
	s := prev
	if s == nil {
		s = state.New()
	}
	for i, st := range steps {
		next, res := decide.Decide(st.obs, s, cfg)
		if res.Verdict != st.verdict || res.Action != st.action {
			t.Fatalf("step %d at +%s: got %s/%s (%s), want %s/%s", i, st.obs.At.Sub(t0), res.Verdict, res.Action, res.Reason, st.verdict, st.action)
		}
		if st.reasonHas != "" && !strings.Contains(res.Reason, st.reasonHas) {
			t.Errorf("step %d: reason %q lacks %q", i, res.Reason, st.reasonHas)
		}
		if st.confirming {
			confirming := false
			for _, tg := range res.Targets {
				confirming = confirming || tg.Confirming
			}
			if !confirming {
				t.Errorf("step %d: expected a target to be confirming strong evidence", i)
			}
		}
		if st.check != nil {
			st.check(t, next, res)
		}
		decide.CountRun(next, res.Verdict)
		s = next
	}
	return s
}

func TestVerdicts(t *testing.T) {
	cfg := testConfig()
	p := func(s *scrape.Sample) decide.Pod { return schedPod("sched-a", "uid-a", s) }
	cases := []struct {
		name    string
		obs     decide.Observation
		verdict state.Verdict
		action  state.Action
		reason  string
	}{
		{"healthy", observe(t0, 3, p(podtest.Sample(3, 0))), state.VerdictHealthy, state.ActionNone, "ready 3"},
		{"healthy with fewer ready and no rejections", observe(t0, 3, p(podtest.Sample(2, 0))), state.VerdictHealthy, state.ActionNone, "ready 2 of 3"},
		{"no serving nodes", observe(t0, 0, p(podtest.Sample(0, 0))), state.VerdictNoNodes, state.ActionNone, "no serving node"},
		{"first sight of a wedge waits", observe(t0, 3, p(podtest.Sample(0, 5))), state.VerdictWedged, state.ActionWait, "ready 0 while the API server lists 3"},
		{"scrape failed", func() decide.Observation {
			pod := p(nil)
			pod.ScrapeErr = &scrape.Error{Kind: scrape.KindTimeout, Err: errors.New("slow")}
			return observe(t0, 3, pod)
		}(), state.VerdictUnknown, state.ActionNone, "metrics unreadable"},
		{"endpoint slices unreadable", func() decide.Observation {
			o := observe(t0, 0, p(podtest.Sample(0, 0)))
			o.ExpectedErr = errors.New("forbidden")
			return o
		}(), state.VerdictUnknown, state.ActionNone, "cannot count serving nodes"},
		{"container not running", func() decide.Observation {
			pod := p(nil)
			pod.Running, pod.StartedAt, pod.WaitingReason = false, time.Time{}, "CrashLoopBackOff"
			return observe(t0, 3, pod)
		}(), state.VerdictUnknown, state.ActionNone, "CrashLoopBackOff"},
		{"container start in the future", func() decide.Observation {
			pod := p(podtest.Sample(0, 0))
			pod.StartedAt = t0.Add(10 * time.Minute)
			return observe(t0, 3, pod)
		}(), state.VerdictUnknown, state.ActionNone, "clock skew"},
		{"small skew is a fresh start", func() decide.Observation {
			pod := p(podtest.Sample(0, 0))
			pod.StartedAt = t0.Add(30 * time.Second)
			return observe(t0, 3, pod)
		}(), state.VerdictStarting, state.ActionNone, "startup grace"},
		{"just inside the startup grace", func() decide.Observation {
			pod := p(podtest.Sample(0, 0))
			pod.StartedAt = t0.Add(-cfg.StartupGrace + time.Second)
			return observe(t0, 3, pod)
		}(), state.VerdictStarting, state.ActionNone, "1m59s ago"},
		{"exactly at the startup grace is judged", func() decide.Observation {
			pod := p(podtest.Sample(0, 0))
			pod.StartedAt = t0.Add(-cfg.StartupGrace)
			return observe(t0, 3, pod)
		}(), state.VerdictWedged, state.ActionWait, "ready 0"},
		{"starting hides a scrape error", func() decide.Observation {
			pod := p(nil)
			pod.StartedAt = t0.Add(-10 * time.Second)
			pod.ScrapeErr = errors.New("connection refused")
			return observe(t0, 3, pod)
		}(), state.VerdictStarting, state.ActionNone, ""},
		{"no pods at all", observe(t0, 3), state.VerdictUnknown, state.ActionNone, "no scheduler pod matches"},
		{"only a terminating pod", func() decide.Observation {
			pod := p(nil)
			pod.Terminating = true
			return observe(t0, 3, pod)
		}(), state.VerdictUnknown, state.ActionNone, "terminating"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			runSteps(t, cfg, nil, []step{{obs: tc.obs, verdict: tc.verdict, action: tc.action, reasonHas: tc.reason}})
		})
	}
}

func TestWedgedForEdges(t *testing.T) {
	cfg := testConfig()
	wedged := func(at time.Time, rejected uint64) decide.Observation {
		return observe(at, 3, schedPod("sched-a", "uid-a", podtest.Sample(0, rejected)))
	}
	t.Run("one second short waits", func(t *testing.T) {
		runSteps(t, cfg, nil, []step{
			{obs: wedged(t0, 0), verdict: state.VerdictWedged, action: state.ActionWait},
			{obs: wedged(t0.Add(cfg.WedgedFor-time.Second), 0), verdict: state.VerdictWedged, action: state.ActionWait, reasonHas: "wedged 3m59s < 4m"},
		})
	})
	at := func(at time.Time) decide.Observation { return wedged(at, 0) }
	t.Run("exactly wedged-for, confirmed in the run, restarts", func(t *testing.T) {
		runSteps(t, cfg, nil, append([]step{{obs: wedged(t0, 0), verdict: state.VerdictWedged, action: state.ActionWait}},
			confirmedRun(cfg, t0.Add(cfg.WedgedFor-cfg.ConfirmWindow), at,
				step{verdict: state.VerdictWedged, action: state.ActionRestart, reasonHas: "wedged 4m ≥ 4m, ready 0 throughout 1m30s of this run's samples"})...))
	})
	t.Run("wedged-for one second short, confirmed in the run, waits", func(t *testing.T) {
		runSteps(t, cfg, nil, append([]step{{obs: wedged(t0, 0), verdict: state.VerdictWedged, action: state.ActionWait}},
			confirmedRun(cfg, t0.Add(cfg.WedgedFor-cfg.ConfirmWindow-time.Second), at,
				step{verdict: state.VerdictWedged, action: state.ActionWait, reasonHas: "wedged 3m59s < 4m"})...))
	})
	t.Run("wedged-for long past but one sample short of the confirm window waits", func(t *testing.T) {
		start := t0.Add(5 * time.Minute)
		runSteps(t, cfg, nil, []step{
			{obs: wedged(t0, 0), verdict: state.VerdictWedged, action: state.ActionWait},
			{obs: inRun(start, wedged(start, 0)), verdict: state.VerdictWedged, action: state.ActionWait, reasonHas: "confirming in this run: ready 0 throughout 0s"},
			{obs: inRun(start, wedged(start.Add(cfg.ConfirmWindow-decide.DefaultSampleInterval), 0)), verdict: state.VerdictWedged, action: state.ActionWait, reasonHas: "1m15s of this run's samples < confirm window 1m30s",
				check: func(t *testing.T, _ *state.State, r decide.Result) {
					if d := r.Targets[0].SampleFor; d == nil || *d != decide.DefaultSampleInterval {
						t.Errorf("due in %v, want 15s: the run must know one more sample makes it due", d)
					}
				}},
		})
	})
	t.Run("two cron runs even when the second fires early", func(t *testing.T) {
		runSteps(t, cfg, nil, append([]step{{obs: wedged(t0, 0), verdict: state.VerdictWedged, action: state.ActionWait}},
			confirmedRun(cfg, t0.Add(5*time.Minute-50*time.Second), at, step{verdict: state.VerdictWedged, action: state.ActionRestart, reasonHas: "weak evidence"})...))
	})
	// Issue: the duration path restarted on two single samples. Two separate
	// API-server flaps five minutes apart (a control-plane upgrade) must not
	// restart a scheduler that heals itself both times.
	t.Run("two flaps five minutes apart are not restarted", func(t *testing.T) {
		second := t0.Add(5 * time.Minute)
		s := runSteps(t, cfg, nil, []step{
			{obs: observe(t0.Add(-5*time.Minute), 3, schedPod("sched-a", "uid-a", podtest.Sample(3, 0))), verdict: state.VerdictHealthy, action: state.ActionNone},
			{obs: wedged(t0, 0), verdict: state.VerdictWedged, action: state.ActionWait},
			{obs: inRun(second, wedged(second, 0)), verdict: state.VerdictWedged, action: state.ActionWait},
			{obs: inRun(second, wedged(second.Add(decide.DefaultSampleInterval), 0)), verdict: state.VerdictWedged, action: state.ActionWait},
			{obs: inRun(second, wedged(second.Add(30*time.Second), 0)), verdict: state.VerdictWedged, action: state.ActionWait},
			{obs: inRun(second, observe(second.Add(45*time.Second), 3, schedPod("sched-a", "uid-a", podtest.Sample(3, 0)))), verdict: state.VerdictHealthy, action: state.ActionNone},
		})
		if len(s.Episodes) != 1 || s.Episodes[0].Outcome != "recovered" {
			t.Errorf("the flaps must end as a recovered episode: %+v", s.Episodes)
		}
	})
	t.Run("a healthy run in between starts over", func(t *testing.T) {
		s := runSteps(t, cfg, nil, []step{
			{obs: wedged(t0, 0), verdict: state.VerdictWedged, action: state.ActionWait},
			{obs: observe(t0.Add(5*time.Minute), 3, schedPod("sched-a", "uid-a", podtest.Sample(3, 0))), verdict: state.VerdictHealthy, action: state.ActionNone},
			{obs: wedged(t0.Add(10*time.Minute), 0), verdict: state.VerdictWedged, action: state.ActionWait},
		})
		if len(s.Episodes) != 1 || s.Episodes[0].Outcome != "recovered" {
			t.Errorf("the ended wedge should be recorded as recovered: %+v", s.Episodes)
		}
	})
}

func TestUnknownPausesTheWedgeClock(t *testing.T) {
	cfg := testConfig()
	// After the gap a heartbeat has been accepted (the accepted counter moved):
	// ready may have come back unseen, so the gap is not bridged.
	wedged := func(at time.Time) decide.Observation {
		s := podtest.Sample(0, 0)
		if at.After(t0) {
			s.HeartbeatOK++
		}
		return observe(at, 3, schedPod("sched-a", "uid-a", s))
	}
	blind := func(at time.Time) decide.Observation {
		p := schedPod("sched-a", "uid-a", nil)
		p.ScrapeErr = &scrape.Error{Kind: scrape.KindHTTPStatus, Err: errors.New("500")}
		return observe(at, 3, p)
	}
	runSteps(t, cfg, nil, append([]step{
		{obs: wedged(t0), verdict: state.VerdictWedged, action: state.ActionWait},
		// A failed first sample of a run: unknown (the pass samples on).
		{obs: blind(t0.Add(5 * time.Minute)), verdict: state.VerdictUnknown, action: state.ActionNone, check: func(t *testing.T, s *state.State, r decide.Result) {
			if r.Targets[0].SampleFor == nil {
				t.Error("a failed sample must leave the pass sampling on")
			}
			bad := s.Pods["uid-a"].Episode
			if bad == nil || bad.For != 0 || !bad.Since.Equal(t0) {
				t.Errorf("an unknown must keep the episode without advancing it: %+v", bad)
			}
			if s.Pods["uid-a"].ConsecutiveUnknowns != 1 {
				t.Errorf("unknowns = %d", s.Pods["uid-a"].ConsecutiveUnknowns)
			}
		}},
		// The gap around the unknown does not count: still 0 after it.
		{obs: wedged(t0.Add(10 * time.Minute)), verdict: state.VerdictWedged, action: state.ActionWait, reasonHas: "wedged 0s < 4m"},
	}, confirmedRun(cfg, t0.Add(15*time.Minute), wedged, step{verdict: state.VerdictWedged, action: state.ActionRestart, check: func(t *testing.T, s *state.State, r decide.Result) {
		if got := r.Targets[0].BadSince; got == nil || !got.Equal(t0) {
			t.Errorf("the episode still began at the first wedged observation: %v", got)
		}
	}})...))
}

func TestFreshClock(t *testing.T) {
	cfg := testConfig()
	first := []step{{obs: observe(t0, 3, schedPod("sched-a", "uid-a", podtest.Sample(0, 10))), verdict: state.VerdictWedged, action: state.ActionWait}}

	t.Run("new pod UID", func(t *testing.T) {
		s := runSteps(t, cfg, nil, first)
		p := schedPod("sched-b", "uid-b", podtest.Sample(0, 10))
		runSteps(t, cfg, s, []step{{obs: observe(t0.Add(5*time.Minute), 3, p), verdict: state.VerdictWedged, action: state.ActionWait,
			check: func(t *testing.T, s *state.State, _ decide.Result) {
				if _, ok := s.Pods["uid-a"]; ok {
					t.Error("the gone pod must be forgotten")
				}
				if len(s.Episodes) != 1 || s.Episodes[0].Outcome != "gone" {
					t.Errorf("episodes %+v", s.Episodes)
				}
			}}})
	})
	t.Run("container restarted", func(t *testing.T) {
		s := runSteps(t, cfg, nil, first)
		p := schedPod("sched-a", "uid-a", podtest.Sample(0, 0))
		p.StartedAt = t0.Add(-3 * time.Minute)
		runSteps(t, cfg, s, []step{{obs: observe(t0.Add(5*time.Minute), 3, p), verdict: state.VerdictWedged, action: state.ActionWait, reasonHas: "no earlier counter value"}})
	})
	t.Run("counter reset means a new process", func(t *testing.T) {
		s := runSteps(t, cfg, nil, first)
		runSteps(t, cfg, s, []step{{obs: observe(t0.Add(5*time.Minute), 3, schedPod("sched-a", "uid-a", podtest.Sample(0, 2))), verdict: state.VerdictWedged, action: state.ActionWait,
			check: func(t *testing.T, s *state.State, r decide.Result) {
				if r.Targets[0].BadFor != 0 {
					t.Errorf("clock not reset: %s", r.Targets[0].BadFor.D())
				}
				if s.Pods["uid-a"].Counters.HeartbeatRejected != 2 {
					t.Error("the new process's counter must become the baseline")
				}
			}}})
	})
}

func TestTerminatingPodIsNotJudged(t *testing.T) {
	cfg := testConfig()
	old := schedPod("sched-old", "uid-old", nil)
	old.Terminating = true
	runSteps(t, cfg, nil, []step{{obs: observe(t0, 3, old, schedPod("sched-new", "uid-new", podtest.Sample(3, 0))), verdict: state.VerdictHealthy, action: state.ActionNone,
		check: func(t *testing.T, s *state.State, r decide.Result) {
			for _, tg := range r.Targets {
				if tg.UID == "uid-old" && (tg.Judged || tg.Action != state.ActionNone || !strings.Contains(tg.Reason, "terminating")) {
					t.Errorf("terminating pod: %+v", tg)
				}
			}
			if _, ok := s.Pods["uid-old"]; ok {
				t.Error("a terminating pod gets no wedge clock")
			}
		}}})
}

// A terminating pod and its live successor may share a name (the backtest's world names
// pods from a label; an observation may be merged): the live one is judged all the same.
func TestTerminatingNamesakeLeavesLivePodJudged(t *testing.T) {
	cfg := testConfig()
	wedged := func(at time.Time) decide.Observation {
		dying := schedPod("sched-0", "u1", nil)
		dying.Terminating = true
		return observe(at, 3, dying, schedPod("sched-0", "u2", podtest.Sample(0, 0)))
	}
	judged := func(t *testing.T, _ *state.State, r decide.Result) {
		for _, tg := range r.Targets {
			if tg.Judged != (tg.UID == "u2") {
				t.Errorf("only u2 is judged: %+v", tg)
			}
		}
	}
	runSteps(t, cfg, nil, append([]step{{obs: wedged(t0), verdict: state.VerdictWedged, action: state.ActionWait, check: judged}},
		confirmedRun(cfg, t0.Add(cfg.WedgedFor-cfg.ConfirmWindow), wedged, step{verdict: state.VerdictWedged, action: state.ActionRestart, check: judged})...))
}

func TestSeveralPods(t *testing.T) {
	cfg := testConfig()
	a := func(at time.Time) decide.Pod { return schedPod("sched-a", "uid-a", podtest.Sample(0, 0)) }
	b := func(at time.Time) decide.Pod { return schedPod("sched-b", "uid-b", podtest.Sample(0, 0)) }
	t.Run("no lease: all judged, restart blocked", func(t *testing.T) {
		both := func(at time.Time) decide.Observation { return observe(at, 3, a(at), b(at)) }
		runSteps(t, cfg, nil, append([]step{{obs: both(t0), verdict: state.VerdictWedged, action: state.ActionWait}},
			confirmedRun(cfg, t0.Add(5*time.Minute), both, step{verdict: state.VerdictWedged, action: state.ActionBlocked, reasonHas: "no --leader-lease"})...))
	})
	t.Run("no lease: worst pod wins the summary", func(t *testing.T) {
		runSteps(t, cfg, nil, []step{{obs: observe(t0, 3, schedPod("sched-a", "uid-a", podtest.Sample(3, 0)), b(t0)), verdict: state.VerdictWedged, action: state.ActionWait, reasonHas: "sched-b"}})
	})
	t.Run("leader only", func(t *testing.T) {
		cfg := cfg
		cfg.LeaderLease = "agentenv-scheduler"
		leader := schedPod("sched-a", "uid-a", podtest.Sample(3, 0))
		standby := schedPod("sched-b", "uid-b", nil) // standbys are not scraped
		o := observe(t0, 3, leader, standby)
		o.Leader = &decide.Leader{Holder: "sched-a_4f1c"}
		runSteps(t, cfg, nil, []step{{obs: o, verdict: state.VerdictHealthy, action: state.ActionNone, check: func(t *testing.T, s *state.State, r decide.Result) {
			if len(r.Targets) != 2 || !r.Targets[0].Judged || r.Targets[1].Judged || !strings.Contains(r.Targets[1].Reason, "standby") {
				t.Errorf("targets %+v", r.Targets)
			}
		}}})
	})
	t.Run("leader lease unreadable", func(t *testing.T) {
		cfg := cfg
		cfg.LeaderLease = "agentenv-scheduler"
		o := observe(t0, 3, a(t0))
		o.Leader = &decide.Leader{Err: errors.New("forbidden")}
		runSteps(t, cfg, nil, []step{{obs: o, verdict: state.VerdictUnknown, action: state.ActionNone, reasonHas: "cannot read leader Lease"}})
	})
	t.Run("leader lease expiry", func(t *testing.T) {
		cfg := cfg
		cfg.LeaderLease = "agentenv-scheduler"
		const duration = 15 * time.Second
		for _, c := range []struct {
			name      string
			renewed   time.Time
			duration  time.Duration
			judged    bool
			verdict   state.Verdict
			reasonHas string
		}{
			{"renewed just now", t0.Add(-2 * time.Second), duration, true, state.VerdictWedged, ""},
			{"past the duration, within the skew allowance", t0.Add(-duration - decide.ClockSkewTolerance + time.Second), duration, true, state.VerdictWedged, ""},
			{"exactly at duration + skew", t0.Add(-duration - decide.ClockSkewTolerance), duration, true, state.VerdictWedged, ""},
			{"expired", t0.Add(-duration - decide.ClockSkewTolerance - time.Second), duration, false, state.VerdictUnknown, "expired at"},
			{"expired long ago", t0.Add(-time.Hour), duration, false, state.VerdictUnknown, "no current leader"},
			{"no renewTime: cannot tell, trusted", time.Time{}, duration, true, state.VerdictWedged, ""},
			{"no duration: cannot tell, trusted", t0.Add(-time.Hour), 0, true, state.VerdictWedged, ""},
		} {
			t.Run(c.name, func(t *testing.T) {
				o := observe(t0, 3, a(t0), schedPod("sched-b", "uid-b", nil))
				o.Leader = &decide.Leader{Holder: "sched-a", RenewedAt: c.renewed, Duration: c.duration}
				_, r := decide.Decide(o, state.New(), cfg)
				if r.Verdict != c.verdict || r.Action == state.ActionRestart || !strings.Contains(r.Reason, c.reasonHas) {
					t.Fatalf("verdict %s action %s reason %q, want %s with %q", r.Verdict, r.Action, r.Reason, c.verdict, c.reasonHas)
				}
				judged := 0
				for _, tg := range r.Targets {
					if tg.Judged {
						judged++
					}
				}
				if want := map[bool]int{true: 1, false: 0}[c.judged]; judged != want {
					t.Fatalf("%d pods judged, want %d: %+v", judged, want, r.Targets)
				}
			})
		}
	})
	t.Run("time without a current leader does not count towards the wedge", func(t *testing.T) {
		cfg := cfg
		cfg.LeaderLease = "agentenv-scheduler"
		const duration = 15 * time.Second
		at := func(d time.Duration, renewed time.Duration) decide.Observation {
			o := observe(t0.Add(d), 3, schedPod("sched-a", "uid-a", podtest.Sample(0, 0)))
			o.Leader = &decide.Leader{Holder: "sched-a", RenewedAt: t0.Add(renewed), Duration: duration}
			return o
		}
		renewed := func(when time.Time) decide.Observation { return at(when.Sub(t0), when.Sub(t0)) }
		runSteps(t, cfg, nil, append([]step{
			{obs: at(0, 0), verdict: state.VerdictWedged, action: state.ActionWait},
			{obs: at(5*time.Minute, 0), verdict: state.VerdictUnknown, action: state.ActionNone, reasonHas: "expired"},
			{obs: at(11*time.Minute, 11*time.Minute), verdict: state.VerdictWedged, action: state.ActionWait, check: func(t *testing.T, s *state.State, r decide.Result) {
				if r.Targets[0].BadFor != 0 {
					t.Errorf("wedged for %s right after the Lease came back; the leaderless gap was counted", r.Targets[0].BadFor.D())
				}
			}},
		}, confirmedRun(cfg, t0.Add(15*time.Minute), renewed, step{verdict: state.VerdictWedged, action: state.ActionRestart})...))
	})
	t.Run("a former leader's episode pauses while it is a standby", func(t *testing.T) {
		cfg := cfg
		cfg.LeaderLease = "agentenv-scheduler"
		held := func(d time.Duration, holder string) decide.Observation {
			o := observe(t0.Add(d), 3, schedPod("sched-a", "uid-a", podtest.Sample(0, 0)), schedPod("sched-b", "uid-b", podtest.Sample(3, 0)))
			o.Leader = &decide.Leader{Holder: holder}
			return o
		}
		runSteps(t, cfg, nil, []step{
			{obs: held(0, "sched-a"), verdict: state.VerdictWedged, action: state.ActionWait},
			{obs: held(5*time.Minute, "sched-b"), verdict: state.VerdictHealthy, action: state.ActionNone},
			{obs: held(10*time.Minute, "sched-a"), verdict: state.VerdictWedged, action: state.ActionWait},
		})
	})
	t.Run("leader not among pods", func(t *testing.T) {
		cfg := cfg
		cfg.LeaderLease = "agentenv-scheduler"
		o := observe(t0, 3, a(t0))
		o.Leader = &decide.Leader{Holder: "sched-zzz"}
		runSteps(t, cfg, nil, []step{{obs: o, verdict: state.VerdictUnknown, action: state.ActionNone, reasonHas: "not a live scheduler pod"}})
	})
}

func wedgedTwice(cfg decide.Config, prev *state.State, o func(at time.Time) decide.Observation) (*state.State, decide.Result) {
	s, _ := decide.Decide(o(t0), prev, cfg)
	return decideRun(cfg, s, t0.Add(5*time.Minute), o)
}

func TestRestartGates(t *testing.T) {
	cfg := testConfig()
	plain := func(at time.Time) decide.Observation {
		return observe(at, 3, schedPod("sched-a", "uid-a", podtest.Sample(0, 0)))
	}

	t.Run("budget spent", func(t *testing.T) {
		prev := state.New()
		for i := 1; i <= 3; i++ {
			prev.Restarts = append(prev.Restarts, state.Restart{UID: "old", ClaimedAt: t0.Add(-time.Duration(i) * 10 * time.Minute), Outcome: state.RestartDone})
		}
		_, r := wedgedTwice(cfg, prev, plain)
		if r.Action != state.ActionBlocked || !strings.Contains(r.Reason, "budget 3/3") {
			t.Fatalf("%s: %s", r.Action, r.Reason)
		}
	})
	t.Run("budget restored once restarts leave the window", func(t *testing.T) {
		prev := state.New()
		for i := 0; i < 3; i++ {
			prev.Restarts = append(prev.Restarts, state.Restart{UID: "old", ClaimedAt: t0.Add(-2 * time.Hour), Outcome: state.RestartDone})
		}
		_, r := wedgedTwice(cfg, prev, plain)
		if r.Action != state.ActionRestart {
			t.Fatalf("%s: %s", r.Action, r.Reason)
		}
	})
	t.Run("abandoned claims do not use the budget", func(t *testing.T) {
		prev := state.New()
		for i := 0; i < 3; i++ {
			prev.Restarts = append(prev.Restarts, state.Restart{UID: "old", ClaimedAt: t0.Add(-time.Minute), Outcome: state.RestartAbandoned})
		}
		if _, r := wedgedTwice(cfg, prev, plain); r.Action != state.ActionRestart {
			t.Fatalf("%s: %s", r.Action, r.Reason)
		}
	})
	t.Run("never twice for one pod", func(t *testing.T) {
		prev := state.New()
		prev.Restarts = []state.Restart{{UID: "uid-a", ClaimedAt: t0.Add(-time.Minute), Outcome: state.RestartDone, Method: decide.MethodRollout}}
		_, r := wedgedTwice(cfg, prev, plain)
		if r.Action != state.ActionBlocked || !strings.Contains(r.Reason, "already restarted") {
			t.Fatalf("%s: %s", r.Action, r.Reason)
		}
	})
	t.Run("a claim left by a crashed run is completed without a new claim", func(t *testing.T) {
		prev := state.New()
		for i := 0; i < 3; i++ {
			prev.Restarts = append(prev.Restarts, state.Restart{UID: "other", ClaimedAt: t0.Add(-time.Minute), Outcome: state.RestartDone})
		}
		prev.Restarts = append(prev.Restarts, state.Restart{UID: "uid-a", ClaimedAt: t0.Add(-time.Minute), Outcome: state.RestartClaimed})
		_, r := wedgedTwice(cfg, prev, plain)
		if r.Action != state.ActionRestart || !r.Targets[0].TakeOverClaim {
			t.Fatalf("%s takeOverClaim=%v: %s", r.Action, r.Targets[0].TakeOverClaim, r.Reason)
		}
	})
	t.Run("a fresh claim of another run blocks", func(t *testing.T) {
		prev, _ := decide.Decide(plain(t0), state.New(), cfg)
		prev.Restarts = append(prev.Restarts, state.Restart{UID: "uid-a", ClaimedAt: t0.Add(5*time.Minute - 10*time.Second), Outcome: state.RestartClaimed})
		_, r := decideRun(cfg, prev, t0.Add(5*time.Minute), plain)
		if r.Action != state.ActionBlocked || !strings.Contains(r.Reason, "may still be acting") {
			t.Fatalf("%s: %s", r.Action, r.Reason)
		}
	})
	t.Run("a claim another run just took over blocks", func(t *testing.T) {
		prev, _ := decide.Decide(plain(t0), state.New(), cfg)
		resumed := t0.Add(5*time.Minute - 10*time.Second)
		prev.Restarts = append(prev.Restarts, state.Restart{UID: "uid-a", ClaimedAt: t0.Add(-time.Hour), ResumedAt: &resumed, Outcome: state.RestartClaimed})
		_, r := decideRun(cfg, prev, t0.Add(5*time.Minute), plain)
		if r.Action != state.ActionBlocked || r.Targets[0].TakeOverClaim || !strings.Contains(r.Reason, "taken over") {
			t.Fatalf("%s takeOverClaim=%v: %s", r.Action, r.Targets[0].TakeOverClaim, r.Reason)
		}
	})
	t.Run("a claim whose pod recovered is abandoned", func(t *testing.T) {
		prev := state.New()
		prev.Restarts = []state.Restart{{UID: "uid-a", ClaimedAt: t0.Add(-time.Minute), Outcome: state.RestartClaimed}}
		next, _ := decide.Decide(observe(t0, 3, schedPod("sched-a", "uid-a", podtest.Sample(3, 0))), prev, cfg)
		if next.Restarts[0].Outcome != state.RestartAbandoned {
			t.Errorf("outcome %s", next.Restarts[0].Outcome)
		}
	})
	t.Run("a claim whose pod is gone is done", func(t *testing.T) {
		prev := state.New()
		prev.Restarts = []state.Restart{{UID: "uid-a", ClaimedAt: t0.Add(-time.Minute), Outcome: state.RestartClaimed, Method: decide.MethodDelete}}
		next, _ := decide.Decide(observe(t0, 3, schedPod("sched-b", "uid-b", podtest.Sample(3, 0))), prev, cfg)
		if next.Restarts[0].Outcome != state.RestartDone {
			t.Errorf("outcome %s", next.Restarts[0].Outcome)
		}
	})

	verified := map[string]decide.OwnerChain{"uid-a": {Verified: true, ReplicaSetUID: "rs-uid", Detail: "pod sched-a → ReplicaSet → Deployment"}}
	rollout := func(r *decide.Rollout) func(at time.Time) decide.Observation {
		return func(at time.Time) decide.Observation { o := plain(at); o.Rollout = r; return o }
	}
	for _, tc := range []struct {
		name    string
		rollout *decide.Rollout
		method  string
		action  state.Action
		need    bool
		reason  string
	}{
		{"rollout not read yet", nil, decide.MethodDelete, state.ActionBlocked, true, "not read yet"},
		{"mid-rollout", &decide.Rollout{Name: "d", Found: true, InProgress: true, Detail: "1 of 2 updated"}, decide.MethodDelete, state.ActionBlocked, false, "mid-rollout"},
		{"paused", &decide.Rollout{Name: "d", Found: true, Paused: true}, decide.MethodDelete, state.ActionBlocked, false, "paused"},
		{"unreadable fails safe", &decide.Rollout{Name: "d", Err: errors.New("forbidden")}, decide.MethodDelete, state.ActionBlocked, false, "cannot read Deployment"},
		{"no deployment, delete method", &decide.Rollout{Name: "d"}, decide.MethodDelete, state.ActionRestart, false, "restarting the pod alone"},
		{"no deployment, rollout method", &decide.Rollout{Name: "d"}, decide.MethodRollout, state.ActionBlocked, false, "needs it"},
		{"rollout method, pod of the Deployment", &decide.Rollout{Name: "agentenv-scheduler", Found: true, Owners: verified}, decide.MethodRollout, state.ActionRestart, false, "not rolling out"},
		{"rollout method, owner chain not read", &decide.Rollout{Name: "agentenv-scheduler", Found: true}, decide.MethodRollout, state.ActionBlocked, false, "not verified by UID"},
		{"rollout method, forged owner chain", &decide.Rollout{Name: "agentenv-scheduler", Found: true, Owners: map[string]decide.OwnerChain{
			"uid-a": {Detail: `pod sched-a names ReplicaSet agentenv-scheduler-7d9c4 with uid "forged"`}}}, decide.MethodRollout, state.ActionBlocked, false, `owner chain not verified: pod sched-a names ReplicaSet agentenv-scheduler-7d9c4 with uid "forged"`},
		{"rollout method, chain verified for another pod only", &decide.Rollout{Name: "agentenv-scheduler", Found: true, Owners: map[string]decide.OwnerChain{
			"uid-b": {Verified: true}}}, decide.MethodRollout, state.ActionBlocked, false, "not verified by UID"},
		{"rollout method, controller reference changed since the chain was checked", &decide.Rollout{Name: "agentenv-scheduler", Found: true, Owners: map[string]decide.OwnerChain{
			"uid-a": {Verified: true, ReplicaSetUID: "old-rs-uid", Detail: "checked"}}}, decide.MethodRollout, state.ActionBlocked, false, `now names ReplicaSet uid "rs-uid", the chain was checked for uid "old-rs-uid"`},
		{"delete method needs no owner chain", &decide.Rollout{Name: "agentenv-scheduler", Found: true}, decide.MethodDelete, state.ActionRestart, false, "not rolling out"},
		{"rollout method, pod of another Deployment", &decide.Rollout{Name: "agentenv-scheduler-canary", Found: true}, decide.MethodRollout, state.ActionBlocked, false, "would restart the wrong pods"},
		{"rollout method, pod of a Deployment whose name extends ours", &decide.Rollout{Name: "agentenv", Found: true}, decide.MethodRollout, state.ActionBlocked, false, "would restart the wrong pods"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := cfg
			cfg.RestartMethod = tc.method
			_, r := wedgedTwice(cfg, state.New(), rollout(tc.rollout))
			if r.Action != tc.action || r.NeedRollout != tc.need {
				t.Fatalf("%s need=%v: %s", r.Action, r.NeedRollout, r.Reason)
			}
			found := false
			for _, g := range r.Targets[0].Gates {
				found = found || strings.Contains(g.Detail, tc.reason)
			}
			if !found {
				t.Errorf("no gate says %q: %+v", tc.reason, r.Targets[0].Gates)
			}
			// Only a failed read asks to sample on and read again.
			again := r.Targets[0].SampleFor != nil && *r.Targets[0].SampleFor == 0
			if want := tc.rollout != nil && tc.rollout.Err != nil; again != want {
				t.Errorf("sample on and read again: %t, want %t", again, want)
			}
		})
	}
}

func TestStrongEvidence(t *testing.T) {
	cfg := testConfig()
	// Observations from t0 on are the samples of one run that started at t0.
	at := func(d time.Duration, ready int, rejected uint64) decide.Observation {
		o := observe(t0.Add(d), 3, schedPod("sched-a", "uid-a", podtest.Sample(ready, rejected)))
		if d >= 0 {
			o.RunStart = t0
		}
		return o
	}
	healthyBefore := step{obs: at(-5*time.Minute, 3, 0), verdict: state.VerdictHealthy, action: state.ActionNone}

	t.Run("confirmed over the window restarts before wedged-for", func(t *testing.T) {
		steps := []step{healthyBefore,
			{obs: at(0, 0, 6), verdict: state.VerdictWedged, action: state.ActionWait, confirming: true, reasonHas: "6 heartbeat(s) rejected"}}
		for d := decide.DefaultSampleInterval; d < cfg.ConfirmWindow; d += decide.DefaultSampleInterval {
			steps = append(steps, step{obs: at(d, 0, 6), verdict: state.VerdictWedged, action: state.ActionWait, confirming: true})
		}
		steps = append(steps, step{obs: at(cfg.ConfirmWindow, 0, 7), verdict: state.VerdictWedged, action: state.ActionRestart, reasonHas: "strong evidence held 1m30s ≥ confirm window 1m30s"})
		runSteps(t, cfg, nil, steps)
	})
	t.Run("a flap that heals inside the window is not restarted", func(t *testing.T) {
		s := runSteps(t, cfg, nil, []step{healthyBefore,
			{obs: at(0, 0, 3), verdict: state.VerdictWedged, action: state.ActionWait, confirming: true},
			{obs: at(decide.DefaultSampleInterval, 0, 6), verdict: state.VerdictWedged, action: state.ActionWait, confirming: true},
			{obs: at(30*time.Second, 0, 9), verdict: state.VerdictWedged, action: state.ActionWait, confirming: true},
			{obs: at(40*time.Second, 3, 9), verdict: state.VerdictHealthy, action: state.ActionNone},
		})
		if len(s.Episodes) != 1 || s.Episodes[0].Outcome != "recovered" || s.Episodes[0].Evidence != "strong" {
			t.Errorf("the healed flap must be recorded: %+v", s.Episodes)
		}
	})
	t.Run("the restarted pod, terminating then gone, keeps its strong episode", func(t *testing.T) {
		steps := []step{healthyBefore, {obs: at(0, 0, 6), verdict: state.VerdictWedged, action: state.ActionWait, confirming: true}}
		for d := decide.DefaultSampleInterval; d < cfg.ConfirmWindow; d += decide.DefaultSampleInterval {
			steps = append(steps, step{obs: at(d, 0, 6), verdict: state.VerdictWedged, action: state.ActionWait, confirming: true})
		}
		steps = append(steps, step{obs: at(cfg.ConfirmWindow, 0, 7), verdict: state.VerdictWedged, action: state.ActionRestart})
		s := runSteps(t, cfg, nil, steps)
		s.Restarts = append(s.Restarts, state.Restart{UID: "uid-a", Pod: "sched-a", ClaimedAt: t0.Add(cfg.ConfirmWindow), Outcome: state.RestartDone, Method: "delete"})
		terminating := at(cfg.ConfirmWindow+5*time.Minute, 0, 7)
		terminating.Pods[0].Terminating = true
		s = runSteps(t, cfg, s, []step{
			{obs: terminating, verdict: state.VerdictUnknown, action: state.ActionNone},
			{obs: observe(t0.Add(cfg.ConfirmWindow+10*time.Minute), 3), verdict: state.VerdictUnknown, action: state.ActionNone},
		})
		if len(s.Episodes) != 1 || s.Episodes[0].Evidence != "strong" {
			t.Errorf("the episode ended with the restart must stay strong: %+v", s.Episodes)
		}
	})
	t.Run("a rise since the episode began is strong though the last interval saw none", func(t *testing.T) {
		runSteps(t, cfg, nil, []step{healthyBefore,
			// First sight without a rise yet (nodes back off): weak.
			{obs: at(0, 0, 0), verdict: state.VerdictWedged, action: state.ActionWait, reasonHas: "may not reach"},
			{obs: at(30*time.Second, 0, 3), verdict: state.VerdictWedged, action: state.ActionWait, confirming: true},
			// Flat since the previous observation, but above the episode's baseline.
			{obs: at(60*time.Second, 0, 3), verdict: state.VerdictWedged, action: state.ActionWait, confirming: true, reasonHas: "since the episode began"},
		})
	})
	t.Run("weak evidence does not confirm early", func(t *testing.T) {
		runSteps(t, cfg, nil, []step{healthyBefore,
			{obs: at(0, 0, 0), verdict: state.VerdictWedged, action: state.ActionWait, reasonHas: "nodes may not reach"},
			{obs: at(2*time.Minute, 0, 0), verdict: state.VerdictWedged, action: state.ActionWait},
		})
	})
	// A failed sample inside the run is a gap, not a verdict: the run still sees
	// the wedge. Whether the gap counts is settled by the next
	// sample: a rejected counter rising on both sides of it (strong evidence held
	// up to it and seen again after it) proves discovery stayed dead.
	blind := at(30*time.Second, 0, 0)
	blind.Pods[0].Sample, blind.Pods[0].ScrapeErr = nil, errors.New("refused")
	t.Run("a failed sample without rejections on both sides restarts confirmation", func(t *testing.T) {
		restartedAt := func(want time.Duration) func(t *testing.T, s *state.State, r decide.Result) {
			return func(t *testing.T, s *state.State, r decide.Result) {
				if e := s.Pods["uid-a"].Episode; e.RunSince == nil || !e.RunSince.Equal(t0.Add(want)) {
					t.Errorf("the in-run streak starts at %v, want +%s", e.RunSince, want)
				}
			}
		}
		// Weak before the gap (no counter moved), strong after it.
		runSteps(t, cfg, nil, []step{{obs: at(-5*time.Minute, 3, 3), verdict: state.VerdictHealthy, action: state.ActionNone},
			{obs: at(0, 0, 3), verdict: state.VerdictWedged, action: state.ActionWait},
			{obs: blind, verdict: state.VerdictWedged, action: state.ActionWait, reasonHas: "this sample failed"},
			{obs: at(60*time.Second, 0, 6), verdict: state.VerdictWedged, action: state.ActionWait, confirming: true, check: restartedAt(60 * time.Second)},
			{obs: at(120*time.Second, 0, 9), verdict: state.VerdictWedged, action: state.ActionWait, confirming: true},
			{obs: at(150*time.Second, 0, 12), verdict: state.VerdictWedged, action: state.ActionRestart},
		})
	})
	t.Run("rejections rising across a failed sample keep confirmation", func(t *testing.T) {
		runSteps(t, cfg, nil, []step{healthyBefore,
			{obs: at(0, 0, 3), verdict: state.VerdictWedged, action: state.ActionWait, confirming: true},
			{obs: blind, verdict: state.VerdictWedged, action: state.ActionWait, confirming: true},
			{obs: at(60*time.Second, 0, 6), verdict: state.VerdictWedged, action: state.ActionWait, confirming: true, check: func(t *testing.T, s *state.State, r decide.Result) {
				if got := r.Targets[0].BadFor.D(); got != 60*time.Second {
					t.Errorf("the gap was not counted: wedged for %s, want 1m", got)
				}
			}},
			{obs: at(120*time.Second, 0, 6), verdict: state.VerdictWedged, action: state.ActionRestart},
		})
	})
	t.Run("confirm window zero disables the fast path", func(t *testing.T) {
		cfg := cfg
		cfg.ConfirmWindow = 0
		runSteps(t, cfg, nil, []step{healthyBefore,
			{obs: at(0, 0, 3), verdict: state.VerdictWedged, action: state.ActionWait},
			{obs: at(3*time.Minute, 0, 9), verdict: state.VerdictWedged, action: state.ActionWait},
		})
	})
	t.Run("an old watch is strong evidence", func(t *testing.T) {
		cfg := cfg
		cfg.MaxWatchAge = 5 * time.Minute
		o := at(0, 0, 0)
		age := 900.0
		o.Pods[0].Sample.WatchAge = &age
		runSteps(t, cfg, nil, []step{{obs: o, verdict: state.VerdictWedged, action: state.ActionWait, confirming: true, reasonHas: "no event for 15m"}})
	})
}

func TestDegraded(t *testing.T) {
	cfg := testConfig()
	at := func(d time.Duration, ready int, rejected uint64) decide.Observation {
		return observe(t0.Add(d), 3, schedPod("sched-a", "uid-a", podtest.Sample(ready, rejected)))
	}
	steps := []step{
		{obs: at(0, 2, 0), verdict: state.VerdictHealthy, action: state.ActionNone},
		{obs: at(5*time.Minute, 2, 4), verdict: state.VerdictDegraded, action: state.ActionWait, reasonHas: "ready 2 of 3"},
		{obs: at(10*time.Minute, 2, 4), verdict: state.VerdictDegraded, action: state.ActionNone, reasonHas: "restart-on-degraded=false"},
	}
	runSteps(t, cfg, nil, steps)

	cfg.RestartOnDegraded = true
	degraded := func(at time.Time) decide.Observation {
		return observe(at, 3, schedPod("sched-a", "uid-a", podtest.Sample(2, 5)))
	}
	runSteps(t, cfg, nil, append(steps[:2], confirmedRun(cfg, t0.Add(10*time.Minute), degraded, step{verdict: state.VerdictDegraded, action: state.ActionRestart})...))
}

func TestDecideDoesNotModifyItsInput(t *testing.T) {
	cfg := testConfig()
	prev, _ := decide.Decide(observe(t0, 3, schedPod("sched-a", "uid-a", podtest.Sample(0, 0))), state.New(), cfg)
	before, err := state.Encode(prev.Clone(), t0)
	if err != nil {
		t.Fatal(err)
	}
	decide.Decide(observe(t0.Add(5*time.Minute), 3, schedPod("sched-a", "uid-a", podtest.Sample(0, 3))), prev, cfg)
	after, _ := state.Encode(prev.Clone(), t0)
	if string(before) != string(after) {
		t.Errorf("Decide modified its input state:\n%s\n---\n%s", before, after)
	}
}

func TestCountRun(t *testing.T) {
	s := state.New()
	decide.CountRun(s, state.VerdictUnknown)
	decide.CountRun(s, state.VerdictUnknown)
	if s.ConsecutiveUnknownRuns != 2 {
		t.Fatalf("unknown runs %d", s.ConsecutiveUnknownRuns)
	}
	// The bad runs of an episode do not reset it (a wedge seen only every other
	// run must still end up blind); a run that sees the scheduler fine does.
	decide.CountRun(s, state.VerdictWedged)
	decide.CountRun(s, state.VerdictDegraded)
	if s.ConsecutiveUnknownRuns != 2 {
		t.Fatalf("a bad run must not reset the count, got %d", s.ConsecutiveUnknownRuns)
	}
	for _, fine := range []state.Verdict{state.VerdictHealthy, state.VerdictStarting, state.VerdictNoNodes} {
		s.ConsecutiveUnknownRuns = 2
		decide.CountRun(s, fine)
		if s.ConsecutiveUnknownRuns != 0 {
			t.Fatalf("%s must reset the count, got %d", fine, s.ConsecutiveUnknownRuns)
		}
	}
}

// Strong evidence confirms a wedge within the confirm window, but a degraded
// scheduler is restarted (with --restart-on-degraded) only after --wedged-for, as
// documented: not after the confirm window, and not before its alert is due.
func TestDegradedIsNotRestartedByTheConfirmWindow(t *testing.T) {
	cfg := testConfig()
	cfg.RestartOnDegraded = true
	at := func(d time.Duration, ready int, rejected uint64) decide.Observation {
		return observe(t0.Add(d), 3, schedPod("sched-a", "uid-a", podtest.Sample(ready, rejected)))
	}
	runSteps(t, cfg, nil, append([]step{
		{obs: at(0, 2, 0), verdict: state.VerdictHealthy, action: state.ActionNone},
		{obs: at(30*time.Second, 2, 4), verdict: state.VerdictDegraded, action: state.ActionWait},
		{obs: at(60*time.Second, 2, 5), verdict: state.VerdictDegraded, action: state.ActionWait},
		{obs: at(90*time.Second, 2, 6), verdict: state.VerdictDegraded, action: state.ActionWait},
		{obs: at(2*time.Minute, 2, 7), verdict: state.VerdictDegraded, action: state.ActionWait, reasonHas: "degraded 1m30s < 4m"},
	}, confirmedRun(cfg, t0.Add(3*time.Minute), func(at time.Time) decide.Observation {
		return observe(at, 3, schedPod("sched-a", "uid-a", podtest.Sample(2, 8)))
	}, step{verdict: state.VerdictDegraded, action: state.ActionRestart})...))
}

// A finished pod (phase Failed, e.g. Evicted, or Succeeded) stays listed until it is
// garbage-collected. It runs no scheduler: it is listed as not judged, and neither
// makes the verdict unknown nor blocks the restart of the live pod through the
// single-target gate.
func TestFinishedPodIsNotJudged(t *testing.T) {
	cfg := testConfig()
	evicted := schedPod("sched-old", "uid-old", nil)
	evicted.Phase, evicted.Running, evicted.WaitingReason = "Failed", false, "terminated: Evicted"
	live := func() decide.Pod { return schedPod("sched-a", "uid-a", podtest.Sample(0, 0)) }
	both := func(at time.Time) decide.Observation { return observe(at, 3, evicted, live()) }
	runSteps(t, cfg, nil, append([]step{{obs: both(t0), verdict: state.VerdictWedged, action: state.ActionWait}},
		confirmedRun(cfg, t0.Add(5*time.Minute), both, step{verdict: state.VerdictWedged, action: state.ActionRestart,
			check: func(t *testing.T, s *state.State, r decide.Result) {
				for _, tg := range r.Targets {
					if tg.UID == "uid-old" && (tg.Judged || tg.Action != state.ActionNone || !strings.Contains(tg.Reason, "Failed")) {
						t.Errorf("finished pod: %+v", tg)
					}
				}
			}})...))
	runSteps(t, cfg, nil, []step{{obs: observe(t0, 3, evicted, schedPod("sched-a", "uid-a", podtest.Sample(3, 0))), verdict: state.VerdictHealthy, action: state.ActionNone}})
}
