package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A check told its Job's name and activeDeadlineSeconds (as the chart's CronJob
// tells it) ends its run JobKillMargin before the Job's deadline when its pod
// started late, instead of running --timeout from its own start and being killed
// mid-confirmation. Here the Job was "scheduled" this minute,
// with a deadline that leaves the run 5 s: a run that would otherwise sample for
// 15 s to restart a weak wedge hands it over instead, cleanly, before the Job's
// deadline.
func TestLateJobPodEndsBeforeItsJobDeadline(t *testing.T) {
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
