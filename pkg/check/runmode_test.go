package check_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/watchdog/internal/schedsim"
	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/scrape"
	"github.com/agentenv/watchdog/pkg/state"
)

// `watchdog run --interval 30s` on the fake clock: the pass of `watchdog check`
// (production defaults) every 30 s from the previous pass's start, against the
// simulated scheduler, the cause at every second of a 30 s span (both the passes'
// and the gauges' 15 s refresh phases), so that the worst phase is among them.

// runModeHeal replays passes every interval, healthy for 5 minutes, until a
// restart or until; the scheduler enters phase offset after the last healthy pass (sim.HealAfter
// set for a Flap). It returns the time from the cause to the end of the pass
// that restarted, and 0 when none did.
//
// With wake, the loop's EndpointSlice watch sees the cause (nodes rolled): the
// next pass starts settle after it, but no sooner than half an interval after
// the last pass started (loop.schedule).
func runModeHeal(t *testing.T, phase schedsim.Phase, offset, healAfter, until time.Duration, wake bool) (time.Duration, []string) {
	h := newHarness(t)
	h.productionDefaults()
	sim := schedsim.NewSimOn(3, 1, h.clk.Now)
	sim.HealAfter = healAfter
	h.obs.see = func(string, time.Time) (decide.Observation, error) {
		pod := schedPod(0, 0)
		sample, err := scrape.Extract(strings.NewReader(schedsim.Page(sim.Values())))
		if err != nil {
			t.Fatalf("the simulated page does not parse: %v", err)
		}
		pod.Sample = &sample
		return observation(3, pod), nil
	}
	const interval, settle = 30 * time.Second, 2 * time.Second
	var log []string
	var cause time.Time
	var early time.Time // the pass the watch brings forward
	for start := t0; ; start = start.Add(interval) {
		if !early.IsZero() {
			start, early = early, time.Time{}
		}
		if h.clk.Now().After(start) {
			start = h.clk.Now() // a pass that ran past the interval: the next starts at once
		}
		h.clk.SetTime(start)
		if !cause.IsZero() && start.Sub(cause) > until {
			return 0, log
		}
		rep, err := h.pass()
		if err != nil {
			t.Fatalf("pass at %s: %v", start, err)
		}
		if cause.IsZero() {
			if rep.Verdict != state.VerdictHealthy {
				t.Fatalf("the pass before the cause: %s", rep.Verdict)
			}
			if start.Sub(t0) < 5*time.Minute {
				continue // the watchdog has been running a while
			}
			cause = start.Add(offset)
			h.clk.SetTime(cause)
			sim.Set(phase)
			if e := start.Add(max(offset+settle, interval/2)); wake && e.Before(start.Add(interval)) {
				early = e
			}
			continue
		}
		log = append(log, fmt.Sprintf("pass at +%s: %s/%s, %d samples, %s", start.Sub(cause).Round(time.Second), rep.Verdict, rep.Action, rep.Samples, rep.Reason))
		if h.restarts() > 0 {
			return h.clk.Now().Sub(cause), log
		}
	}
}

// The time from the cause to the restart in run mode, strong evidence (discovery
// dead, nodes rolled) and weak (nodes unreachable), over every phase; printed for
// docs/performance.md. At the worst phase a strong wedge is restarted within
// 2m00s of the cause when the EndpointSlice watch starts a pass on the roll
// (2m39s before strong evidence counted from the roll's first rejected
// heartbeats), within 2m20s on the plain interval, a weak one within 3m40s.
func TestRunModeHealLatency(t *testing.T) {
	for _, c := range []struct {
		name  string
		phase schedsim.Phase
		wake  bool
		worst time.Duration
	}{
		{"strong (discovery dead, nodes rolled)", schedsim.DeadRolled, false, 2*time.Minute + 20*time.Second},
		{"strong, early pass on the roll", schedsim.DeadRolled, true, 2 * time.Minute},
		{"weak (nodes unreachable)", schedsim.Unreachable, false, 3*time.Minute + 40*time.Second},
	} {
		var heal []time.Duration
		worstLog := []string(nil)
		for offset := time.Second; offset <= 30*time.Second; offset += time.Second {
			d, log := runModeHeal(t, c.phase, offset, 0, 5*time.Minute, c.wake)
			if d == 0 {
				t.Errorf("%s, cause %s after a pass: no restart in 5 minutes:\n%s", c.name, offset, strings.Join(log, "\n"))
				continue
			}
			if len(heal) == 0 || d > slices.Max(heal) {
				worstLog = log
			}
			heal = append(heal, d)
		}
		if len(heal) == 0 {
			continue
		}
		slices.Sort(heal)
		if worst := heal[len(heal)-1]; worst > c.worst {
			t.Errorf("%s: restarted %s after the cause at the worst phase, want at most %s:\n%s", c.name, worst.Round(time.Second), c.worst, strings.Join(worstLog, "\n"))
		}
		t.Logf("run --interval 30s, %-38s cause to restart: best %s, median %s, worst %s", c.name+":", heal[0].Round(time.Second), heal[len(heal)/2].Round(time.Second), heal[len(heal)-1].Round(time.Second))
		t.Logf("worst phase:\n%s", strings.Join(worstLog, "\n"))
	}
}

// An API-server flap that heals itself within 90 s (ready 0 and heartbeats
// rejected until the informer recovers) is never restarted in run mode, at any
// phase.
func TestRunModeFlapsHealingWithin90sAreNotRestarted(t *testing.T) {
	for _, wake := range []bool{false, true} {
		for heal := 15 * time.Second; heal <= 90*time.Second; heal += 15 * time.Second {
			for offset := time.Second; offset <= 30*time.Second; offset += time.Second {
				if d, log := runModeHeal(t, schedsim.Flap, offset, heal, 10*time.Minute, wake); d != 0 {
					t.Errorf("a flap healing after %s, %s after a pass (early pass on a change of the EndpointSlices: %t): restarted %s after it:\n%s", heal, offset, wake, d.Round(time.Second), strings.Join(log, "\n"))
				}
			}
		}
	}
}
