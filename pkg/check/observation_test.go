package check_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/agentenv/watchdog/pkg/state"
)

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
			if !rep.StateWritten || (rep.Action != state.ActionRestart && rep.Action != state.ActionWait) {
				t.Errorf("observations of %s: %s/%s, state written %t", took, rep.Verdict, rep.Action, rep.StateWritten)
			}
			if ran := h.clk.Since(t0); ran > h.timeout {
				t.Errorf("observations of %s: the pass ran %s, past its %s deadline", took, ran, h.timeout)
			}
			t.Logf("observations of %s: %s after %d samples, %s in", took, rep.Action, rep.Samples, h.clk.Since(t0))
		})
	}
}
