package check_test

import (
	"testing"
	"time"

	"github.com/agentenv/watchdog/pkg/decide"
)

// Scale-to-zero in the middle of a wedge: the wedged pod is
// deleted by its Deployment going to zero replicas, with discovery maybe still
// dead. Nothing may say the scheduler recovered: no scheduler runs, nothing was
// seen healthy.
func TestScaleToZeroMidWedgeIsNotRecovered(t *testing.T) {
	h := newHarness(t)
	h.productionDefaults()
	h.obs.see = wedgedWeak
	h.timeout = time.Minute  // short runs: the wedge is seen and paged, not restarted
	for i := 0; i < 2; i++ { // wedged, paged
		if _, err := h.pass(); err != nil {
			t.Fatal(err)
		}
		h.clk.SetTime(t0.Add(time.Duration(i+1) * 5 * time.Minute))
	}
	if got := h.sink.events(); len(got) == 0 || got[0] != "wedged" {
		t.Fatalf("sent %v before the scale-down", got)
	}
	sent := len(h.sink.events())
	steps := []struct {
		name string
		see  func(string, time.Time) (decide.Observation, error)
	}{
		{"terminating", func(string, time.Time) (decide.Observation, error) {
			p := schedPod(0, 11)
			p.Terminating = true
			return observation(3, p), nil
		}},
		{"no pod", func(string, time.Time) (decide.Observation, error) { return observation(3), nil }},
		{"no pod, no nodes", func(string, time.Time) (decide.Observation, error) { return observation(0), nil }},
	}
	for i, st := range steps {
		h.obs.see = st.see
		h.clk.SetTime(t0.Add(time.Duration(10+5*i) * time.Minute))
		rep, err := h.pass()
		t.Logf("%s: %s/%s, %v: %s", st.name, rep.Verdict, rep.Action, err, rep.Reason)
		if got := h.sink.events()[sent:]; len(got) > 0 {
			for _, ev := range got {
				if ev == "recovered" {
					t.Errorf("%s: sent %v: the scheduler was scaled away, not seen recovered", st.name, got)
				}
			}
		}
	}
	t.Logf("sent after the scale-down: %v", h.sink.events()[sent:])
}
