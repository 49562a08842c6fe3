package check_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/agentenv/watchdog/pkg/decide"
)

// Observations are not instant, least of all when the API server is in trouble,
// which is when discovery dies. With the production defaults,
// a run that first sees a weak wedge restarts it itself whether each observation
// takes 0 or 5 s (every other API call half as long): the samples keep their
// cadence and the run's budget fits them.
//
// Each observation takes took, or (jittered) a time drawn from [took/2, took] with
// a seeded generator: a sample that comes back faster than the one before leaves
// the wedge clock short of a whole interval, which the run's budget must absorb.
func TestSlowObservationsStillRestartInTheFirstRun(t *testing.T) {
	for took := time.Duration(0); took <= 5*time.Second; took += 250 * time.Millisecond {
		for _, jitter := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/jitter=%t", took, jitter), func(t *testing.T) {
				h := newHarness(t)
				h.productionDefaults()
				h.slowAPI(took)
				if jitter {
					h.obs.jitter = rand.New(rand.NewPCG(17, uint64(took)))
				}
				rep, err := h.pass()
				if err != nil {
					t.Fatal(err)
				}
				if rep.Action != decide.ActionRestart || h.restarts() != 1 {
					t.Fatalf("observations of %s: the first run ended %s/%s after %d samples, %s in (%d restarts): %s",
						took, rep.Verdict, rep.Action, rep.Samples, h.clk.Since(t0), h.restarts(), rep.Reason)
				}
				if ran := h.clk.Since(t0); ran > h.timeout {
					t.Errorf("the pass ran %s, past its %s deadline", ran, h.timeout)
				}
				t.Logf("observations of %s (jitter %t): restarted %s into the run, after %d samples", took, jitter, h.clk.Since(t0), rep.Samples)
			})
		}
	}
}

// Beyond 5 s an observation is too slow for a first-run restart of a weak wedge
// within --timeout, but the run must still end cleanly before its deadline: the
// reads a restart needs are reserved as long as the pass's slowest observation
// times two, so the run hands over (state written, no error) instead of
// restarting and then missing the write.
func TestTooSlowObservationsHandOverBeforeTheDeadline(t *testing.T) {
	for took := 5 * time.Second; took <= 10*time.Second; took += time.Second {
		t.Run(fmt.Sprint(took), func(t *testing.T) {
			h := newHarness(t)
			h.productionDefaults()
			h.slowAPI(took)
			rep, err := h.pass()
			if err != nil {
				t.Fatalf("observations of %s: %v (%s/%s)", took, err, rep.Verdict, rep.Action)
			}
			if !rep.StateWritten || (rep.Action != decide.ActionRestart && rep.Action != decide.ActionWait) {
				t.Errorf("observations of %s: %s/%s, state written %t", took, rep.Verdict, rep.Action, rep.StateWritten)
			}
			if ran := h.clk.Since(t0); ran > h.timeout {
				t.Errorf("observations of %s: the pass ran %s, past its %s deadline", took, ran, h.timeout)
			}
			t.Logf("observations of %s: %s after %d samples, %s in", took, rep.Action, rep.Samples, h.clk.Since(t0))
		})
	}
}
