package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// The CLI's wiring of --job-name and --job-active-deadline (the timing, 0-120 s
// late, is pkg/check's TestLateJobPodFinishesBeforeTheJobDeadline): a run whose
// Job leaves it 5 s, which would otherwise sample for 15 s to restart a weak
// wedge, hands the wedge over cleanly before the Job's deadline.
func TestJobFlagsEndTheRunBeforeTheJobDeadline(t *testing.T) {
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-discovery-dead.txt")})
	sampling := []string{"--wedged-for", "15s", "--confirm-window", "10s", "--sample-interval", "1s", "--timeout", "30s"}

	now := time.Now()
	scheduled := now.Truncate(time.Minute)
	active := now.Sub(scheduled).Truncate(time.Second) + 35*time.Second // the cap: 5 s from now
	r := s.check(append(sampling, "--job-name", fmt.Sprintf("agentenv-scheduler-watchdog-%d", scheduled.Unix()/60),
		"--job-active-deadline", active.String())...)
	r.expect(t, 0, "wedged", "wait")
	if r.took > 5*time.Second || !strings.Contains(r.stderr, "the Job's pod started late") {
		t.Fatalf("a run whose Job ends in 5 s took %s (want it to end before the Job's deadline and say why):\n%s", r.took, r.stderr)
	}
	if !r.report.StateWritten {
		t.Error("the run did not hand its observations over")
	}
	capped := r.took

	// Without the Job's name the same run samples on for --wedged-for.
	r = s.check(sampling...)
	r.expect(t, 0, "wedged", "restart")
	if r.took < 10*time.Second {
		t.Errorf("without the Job's deadline the run took only %s", r.took)
	}
	t.Logf("capped by the Job's deadline the run took %s; without it, %s", capped, r.took)
}
