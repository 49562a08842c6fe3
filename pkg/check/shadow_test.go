package check_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/state"
)

// Shadow mode (--shadow), step by step on the fake clock: it runs as live (state,
// episodes, alerts) but records a would-restart where it would restart, once per
// episode, and restarts nothing; leaving it keeps the state and restarts an old
// episode only after a fresh confirmation. What the API server sees of it (no
// delete, the Events, status) is test/integration's TestShadowWeek.

func TestShadowRecordsAWouldRestartOncePerEpisodeAndRestartsNothing(t *testing.T) {
	h := newHarness(t)
	h.opts.Mode = state.ModeShadow
	h.wedgedAndDue()
	rep, err := h.pass()
	if err != nil || rep.Verdict != state.VerdictWedged || rep.Action != state.ActionRestart || !rep.Shadow {
		t.Fatalf("due in shadow mode: %s/%s shadow=%v %v", rep.Verdict, rep.Action, rep.Shadow, err)
	}
	if h.restarts() != 0 || len(rep.Restarts) != 0 || contains(h.calls.list(), "consistent") == false {
		t.Fatalf("restarts %d, report %+v, calls %v: shadow mode must decide as live (consistent re-read included) and restart nothing", h.restarts(), rep.Restarts, h.calls.list())
	}
	if len(rep.WouldRestarts) != 1 || rep.WouldRestarts[0].Pod != podName {
		t.Fatalf("report would-restarts %+v, want one for %s", rep.WouldRestarts, podName)
	}
	s := h.store.current(t)
	if len(s.Restarts) != 0 || len(s.WouldRestarts) != 1 {
		t.Fatalf("stored restarts %+v, would-restarts %+v: want none and one", s.Restarts, s.WouldRestarts)
	}
	w := s.WouldRestarts[0]
	if w.UID != podUID || w.Evidence != state.EvidenceWeak || !w.EpisodeSince.Equal(t0) || !strings.Contains(w.Gates, "→ restart") {
		t.Errorf("would-restart %+v: want the pod, its evidence, its episode and its gates", w)
	}
	if !s.LastRun.Shadow {
		t.Error("the last run is not marked shadow")
	}
	// Every alert says shadow; the would-restart is its own warning.
	var would []alert.Notification
	for _, n := range h.sink.sent {
		if !n.Shadow {
			t.Errorf("alert %s not marked shadow", n.Event)
		}
		if n.Event == alert.EventWouldRestart {
			would = append(would, n)
		}
	}
	if len(would) != 1 || would[0].Severity != alert.SeverityWarning ||
		alert.Spec(alert.EventWouldRestart).Alertname == "" {
		t.Fatalf("would-restart alerts %+v, want one warning with an alertname of its own", would)
	}
	if got := h.events.list(); !contains(got, alert.Spec(alert.EventWouldRestart).Reason+" Pod/"+podName) || contains(got, alert.Spec(alert.EventRestarted).Reason) {
		t.Errorf("Events %v: want a would-restart on the pod, and no restart", got)
	}

	// The pod stays wedged: later runs of the episode would restart again; one
	// record with repeats, no second alert.
	for range 3 {
		h.clk.Step(5 * time.Minute)
		if rep, err = h.pass(); err != nil || rep.Action != state.ActionRestart || len(rep.WouldRestarts) != 0 {
			t.Fatalf("later run: %s/%s, would-restarts %+v, %v", rep.Verdict, rep.Action, rep.WouldRestarts, err)
		}
	}
	s = h.store.current(t)
	if len(s.WouldRestarts) != 1 || s.WouldRestarts[0].Repeats != 3 {
		t.Errorf("would-restarts %+v, want one with 3 repeats", s.WouldRestarts)
	}
	if n := strings.Count(strings.Join(h.sink.events(), ","), alert.EventWouldRestart); n != 1 || h.restarts() != 0 {
		t.Errorf("%d would-restart alerts and %d restarts over the episode, want 1 and 0", n, h.restarts())
	}
}

// Leaving shadow mode keeps the state: the episode, its clock and the record stay.
// The first live run does not restart on its first sample: it confirms the wedge
// afresh (--confirm-window of its own samples) and only then restarts.
func TestLeavingShadowRestartsAnOldEpisodeOnlyAfterAFreshConfirmation(t *testing.T) {
	for _, tc := range []struct {
		name          string
		confirmWindow time.Duration
		// wantSampled is the least time the restarting run must have sampled.
		wantSampled time.Duration
		wantRuns    int
	}{
		{name: "confirm window 90s", confirmWindow: 90 * time.Second, wantSampled: 90 * time.Second, wantRuns: 1},
		// Without a confirm window, the episode's clock starts over: --wedged-for
		// (4m) of live observations first, which one run cannot hold (3m deadline).
		{name: "no confirm window", confirmWindow: 0, wantRuns: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.opts.Decide.ConfirmWindow = tc.confirmWindow
			h.opts.Mode = state.ModeShadow
			h.wedgedAndDue()
			for range 3 { // a long episode watched in shadow mode
				if _, err := h.pass(); err != nil {
					t.Fatal(err)
				}
				h.clk.Step(5 * time.Minute)
			}
			before := h.store.current(t)
			if len(before.WouldRestarts) != 1 || before.Pods[podUID].Episode == nil || before.Pods[podUID].Episode.For.D() < 10*time.Minute {
				t.Fatalf("shadow mode left %+v", before)
			}

			h.opts.Mode = state.ModeLive
			for run := 1; ; run++ {
				start := h.clk.Now()
				rep, err := h.pass()
				if err != nil {
					t.Fatal(err)
				}
				if rep.Action == state.ActionRestart {
					if run != tc.wantRuns {
						t.Errorf("restarted in live run %d, want run %d", run, tc.wantRuns)
					}
					if sampled := h.clk.Now().Sub(start); sampled < tc.wantSampled {
						t.Errorf("restarted after %s of the run's samples, want ≥ %s", sampled, tc.wantSampled)
					}
					break
				}
				if run >= 3 {
					t.Fatalf("no restart in %d live runs: %s", run, rep.Reason)
				}
				h.clk.Step(5 * time.Minute)
			}
			after := h.store.current(t)
			if h.restarts() != 1 || len(after.WouldRestarts) != 1 {
				t.Errorf("restarts %d, would-restarts %+v: one restart, and shadow mode's record kept", h.restarts(), after.WouldRestarts)
			}
			if ps := after.Pods[podUID]; ps == nil || ps.Episode == nil || !ps.Episode.Since.Equal(t0) {
				t.Errorf("pod record %+v: the episode watched in shadow mode must be kept, not reset", ps)
			}
		})
	}
}

// A shadow alert that could not be delivered is retried from the outbox, and the
// retry still says shadow: the marker is part of what the outbox keeps.
func TestShadowMarkerSurvivesTheOutbox(t *testing.T) {
	h := newHarness(t)
	h.opts.Mode = state.ModeShadow
	h.sink.fail = errors.New("receiver answered 503")
	h.wedgedAndDue()
	if _, err := h.pass(); err != nil {
		t.Fatal(err)
	}
	if s := h.store.current(t); len(s.Outbox) == 0 {
		t.Fatal("nothing kept in the outbox while the receiver failed")
	}
	h.sink.fail = nil
	h.clk.Step(5 * time.Minute)
	if _, err := h.pass(); err != nil {
		t.Fatal(err)
	}
	var retried []string
	for _, n := range h.sink.sent {
		if !n.Shadow {
			t.Errorf("%s delivered without the shadow marker", n.Event)
		}
		retried = append(retried, n.Event)
	}
	if !slices.Contains(retried, alert.EventWouldRestart) {
		t.Errorf("delivered %v after the outage, want the would-restart retried", retried)
	}
}
