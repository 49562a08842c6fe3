package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/agentenv/watchdog/internal/testenv"
	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/state"
)

// TestShadowWeek replays a shadow week on the real API server, on the compressed
// clock of the scenarios (a */5 CronJob every 10 s): `watchdog check --shadow` runs
// exactly as live, records a would-restart where it would restart (once per
// episode; an Event on the pod), restarts nothing, keeps every episode; a second
// wedge is a second would-restart; leaving shadow mode keeps the state and the
// first live run restarts the wedged pod only after confirming the wedge afresh
// in its own samples.
func TestShadowWeek(t *testing.T) {
	s := newSimScenario(t)
	interval := time.Duration(float64(5*time.Minute) / speed)
	shadow := func() result {
		t.Helper()
		r := s.check("--shadow")
		if r.code != 0 || !r.report.Shadow {
			t.Fatalf("shadow run: exit %d shadow=%v\n%s", r.code, r.report.Shadow, r.stderr)
		}
		return r
	}
	// wedgeUntilWouldRestart runs the CronJob until a run would restart.
	wedgeUntilWouldRestart := func(episode int) {
		t.Helper()
		s.sim.Set(testenv.DeadRolled)
		for run := 1; ; run++ {
			time.Sleep(interval)
			r := shadow()
			if r.report.Action != state.ActionRestart {
				if run > 4 {
					t.Fatalf("episode %d: no would-restart in %d runs: %s", episode, run, r.report.Reason)
				}
				continue
			}
			if len(r.report.WouldRestarts) != 1 || len(r.report.Restarts) != 0 || !s.podExists(s.pod.Name) {
				t.Fatalf("episode %d: would-restarts %+v, restarts %+v, pod there %v: want one would-restart and the pod untouched",
					episode, r.report.WouldRestarts, r.report.Restarts, s.podExists(s.pod.Name))
			}
			return
		}
	}

	shadow().expect(t, 0, "healthy", "none")
	wedgeUntilWouldRestart(1)
	// The wedge goes on: each run would restart again; the record counts repeats.
	for range 2 {
		time.Sleep(interval)
		if r := shadow(); r.report.Action != state.ActionRestart || len(r.report.WouldRestarts) != 0 {
			t.Fatalf("same episode: %s, would-restarts %+v: want restart due and no new record", r.report.Action, r.report.WouldRestarts)
		}
	}
	st, _ := s.state()
	if len(st.WouldRestarts) != 1 || st.WouldRestarts[0].Repeats != 2 || st.WouldRestarts[0].Evidence != "strong" || len(st.Restarts) != 0 {
		t.Fatalf("state after episode 1: would-restarts %+v, restarts %+v", st.WouldRestarts, st.Restarts)
	}
	if ev := s.events(s.pod.Name, alert.Spec(alert.EventWouldRestart).Reason); len(ev) != 1 || ev[0].Type != "Warning" || !strings.HasPrefix(ev[0].Message, "[would-restart]") || !strings.Contains(ev[0].Message, " [shadow]") {
		t.Fatalf("Events %s on the pod: %+v, want one Warning marked shadow", alert.Spec(alert.EventWouldRestart).Reason, ev)
	}
	if ev := s.events(s.pod.Name, alert.Spec(alert.EventRestarted).Reason); len(ev) != 0 {
		t.Fatalf("a restart Event in shadow mode: %+v", ev)
	}

	// The scheduler heals; later the same week it wedges again: a second record.
	s.sim.Set(testenv.Healthy)
	time.Sleep(interval)
	shadow().expect(t, 0, "healthy", "none")
	wedgeUntilWouldRestart(2)
	st, _ = s.state()
	if len(st.WouldRestarts) != 2 || len(st.Episodes) != 1 || st.Episodes[0].Outcome != "recovered" {
		t.Fatalf("after episode 2: would-restarts %+v, episodes %+v: want two records and the first episode recovered", st.WouldRestarts, st.Episodes)
	}
	status := runCLI(t, "status", "--kubeconfig", env.Kubeconfig, "--namespace", s.ns)
	if status.code != 0 || strings.Count(status.stdout, "would-restart "+s.pod.Name+": shadow mode: would have restarted it") != 2 {
		t.Errorf("watchdog status does not list both would-restarts:\n%s", status.stdout)
	}
	t.Logf("watchdog status after a shadow week:\n%s", status.stdout)

	// Restarts on: the state is kept, and the first live run confirms afresh.
	time.Sleep(interval)
	start := time.Now()
	r := s.check()
	took := time.Since(start)
	r.expect(t, 0, "wedged", "restart")
	confirm := time.Duration(float64(90*time.Second) / speed)
	if r.report.Samples < 2 || took < confirm {
		t.Errorf("the first live run restarted after %d samples in %s: want a fresh confirmation (≥ %s of samples)", r.report.Samples, took, confirm)
	}
	if s.podExists(s.pod.Name) {
		t.Fatal("restarts on, but the wedged pod was not restarted")
	}
	st, _ = s.state()
	if len(st.Restarts) != 1 || len(st.WouldRestarts) != 2 || st.LastRun.Shadow {
		t.Errorf("after the live run: restarts %+v, would-restarts %d, last run shadow %v", st.Restarts, len(st.WouldRestarts), st.LastRun.Shadow)
	}
	t.Logf("shadow week: 2 would-restarts recorded, nothing restarted; first live run restarted after %d samples in %s", r.report.Samples, took.Round(time.Millisecond))
}
