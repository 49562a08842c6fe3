package decide_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/watchdog/internal/podtest"
	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/state"
)

// TestMaxPods: past --max-pods live pods nobody is judged (unknown, no restart,
// a warning), a running wedge clock pauses, and at the limit pods are judged.
func TestMaxPods(t *testing.T) {
	cfg := testConfig()
	cfg.MaxPods = 3
	pods := func(n int) []decide.Pod {
		var out []decide.Pod
		for i := range n {
			out = append(out, schedPod(fmt.Sprintf("sched-%d", i), fmt.Sprintf("uid-%d", i), podtest.Sample(0, 0)))
		}
		return out
	}

	t.Run("over the limit", func(t *testing.T) {
		prev := state.New()
		prev.Pods["uid-0"] = &state.Pod{Name: "sched-0", StartedAt: started, LastVerdict: state.VerdictWedged,
			Episode: &state.OpenEpisode{Kind: state.VerdictWedged, Since: t0.Add(-10 * time.Minute), Last: t0.Add(-time.Minute), For: state.Duration(9 * time.Minute)}}
		live := pods(4)
		gone := schedPod("sched-x", "uid-x", nil)
		gone.Terminating = true // terminating pods do not count
		next, r := decide.Decide(observe(t0, 3, append(live, gone)...), prev, cfg)
		if r.Verdict != state.VerdictUnknown || r.Action != state.ActionNone {
			t.Fatalf("%s/%s: %s", r.Verdict, r.Action, r.Reason)
		}
		if !strings.Contains(r.Reason, "4 live pods match the selector, more than --max-pods 3") {
			t.Errorf("reason %q", r.Reason)
		}
		if len(r.Warnings) != 1 || r.Warnings[0] != r.Reason {
			t.Errorf("warnings %q", r.Warnings)
		}
		for _, tg := range r.Targets {
			if tg.Judged || tg.Action != state.ActionNone {
				t.Errorf("target %+v judged", tg)
			}
		}
		if len(next.Pods) != 1 || next.Pods["uid-0"].LastVerdict != state.VerdictUnknown {
			t.Errorf("the wedge clock of a pod not judged must pause, and no pod be added: %+v", next.Pods)
		}
	})
	t.Run("at the limit", func(t *testing.T) {
		_, r := decide.Decide(observe(t0, 3, pods(3)...), state.New(), cfg)
		if len(r.Warnings) != 0 || r.Verdict != state.VerdictWedged {
			t.Fatalf("%s, warnings %q: %s", r.Verdict, r.Warnings, r.Reason)
		}
	})
	t.Run("zero is no limit", func(t *testing.T) {
		cfg := cfg
		cfg.MaxPods = 0
		_, r := decide.Decide(observe(t0, 3, pods(50)...), state.New(), cfg)
		if len(r.Warnings) != 0 || r.Verdict != state.VerdictWedged {
			t.Fatalf("%s, warnings %q: %s", r.Verdict, r.Warnings, r.Reason)
		}
	})
}
