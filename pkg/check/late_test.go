package check_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentenv/watchdog/pkg/cli"
	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/state"
)

// chartActiveDeadline is the chart's cronjob.activeDeadlineSeconds (test/chart
// checks that the CronJob passes it as --job-active-deadline).
const chartActiveDeadline = 270 * time.Second

// A CronJob's pod can start late (scheduling, the image pull, start-up), while
// activeDeadlineSeconds counts from the Job's start. A pod that
// starts up to 120 s late still ends its pass before the Job is killed: with a
// restart, or a clean hand-over to the next run (state written, no error, the
// wedge paged), for a strong and a weak wedge.
func TestLateJobPodFinishesBeforeTheJobDeadline(t *testing.T) {
	for _, wedge := range []struct {
		name string
		see  func(string, time.Time) (decide.Observation, error)
	}{{"strong", wedgedStrong}, {"weak", wedgedWeak}} {
		for late := time.Duration(0); late <= 120*time.Second; late += 10 * time.Second {
			t.Run(fmt.Sprintf("%s/%s late", wedge.name, late), func(t *testing.T) {
				h := newHarness(t)
				h.productionDefaults()
				h.obs.see = wedge.see
				scheduled := t0 // a whole minute, as a */5 schedule's times are
				h.clk.SetTime(scheduled.Add(late))
				start := h.clk.Now()
				job := cli.JobOptions{Name: fmt.Sprintf("agentenv-scheduler-watchdog-%d", scheduled.Unix()/60), ActiveDeadline: chartActiveDeadline}
				deadline, _, _ := job.Deadline(start, h.timeout)
				ctx, cancel := context.WithDeadline(context.Background(), deadline)
				defer cancel()
				rep, err := h.runner().Run(ctx)
				killed := scheduled.Add(chartActiveDeadline)
				if end := h.clk.Now(); !end.Before(killed) {
					t.Fatalf("started %s after its schedule: the pass ended %s after it, at or past the Job's deadline (%s)", late, end.Sub(scheduled), chartActiveDeadline)
				}
				if err != nil || !rep.StateWritten {
					t.Fatalf("started %s late: %v, state written %t", late, err, rep.StateWritten)
				}
				if rep.Action != state.ActionRestart && (rep.Action != state.ActionWait || rep.Verdict != state.VerdictWedged) {
					t.Errorf("started %s late: %s/%s, want a restart or a hand-over of the wedge", late, rep.Verdict, rep.Action)
				}
				t.Logf("%s wedge, started %s after its schedule: %s after %s, %s before the Job's deadline", wedge.name, late, rep.Action, h.clk.Since(start), killed.Sub(h.clk.Now()))
			})
		}
	}
}

// A confirmation cut short by a shutdown (SIGTERM: a node drain, or the Job's
// deadline) is not lost: the pass writes what it observed, and the next run
// restarts as soon as it has confirmed the wedge in-run (--confirm-window), not a
// whole --wedged-for later.
func TestInterruptedConfirmationIsNotLost(t *testing.T) {
	h := newHarness(t)
	h.productionDefaults()
	ctx, cancel := context.WithDeadline(context.Background(), h.clk.Now().Add(h.timeout))
	defer cancel()
	h.clk.OnWait = func(time.Duration) bool {
		if h.clk.Since(t0) >= 145*time.Second-cli.DefaultSampleInterval {
			cancel() // the SIGTERM, 145 s into the pass
			return false
		}
		return true
	}
	rep, err := h.runner().Run(ctx)
	if err == nil || rep.Action == state.ActionRestart {
		t.Fatalf("the interrupted pass: %s/%s, %v", rep.Verdict, rep.Action, err)
	}
	h.clk.OnWait = nil
	next := t0.Add(5 * time.Minute)
	h.clk.SetTime(next)
	rep, err = h.pass()
	if err != nil || rep.Action != state.ActionRestart {
		t.Fatalf("the next run: %s/%s, %v: %s", rep.Verdict, rep.Action, err, rep.Reason)
	}
	if took := h.clk.Since(next); took > cli.DefaultConfirmWindow+30*time.Second {
		t.Errorf("the next run restarted %s in: the interrupted run's observations were lost", took)
	}
}
