package check_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/check"
	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/events"
	"github.com/agentenv/watchdog/pkg/restart"
	"github.com/agentenv/watchdog/pkg/state"
	"github.com/agentenv/watchdog/pkg/statestore"
)

// Unit tests of the pass (observe, decide, confirm, re-read, claim, act, alert,
// persist) over in-memory fakes and a fake clock: the pass's own logic. What the
// API server does is test/integration's, the decision's rules pkg/decide's.

// The path every other test departs from: a wedge first seen waits (no consistent
// read, no Deployment read), and once due it is restarted, recorded, and alerted.
func TestWedgeWaitsThenRestarts(t *testing.T) {
	h := newHarness(t)
	h.wedgedAndDue()
	if got := h.calls.list(); contains(got, "consistent") || contains(got, "rollout") {
		t.Errorf("a pass with nothing to restart read more than the cached lists: %v", got)
	}
	if got := h.sink.events(); len(got) != 1 || got[0] != alert.EventWedged {
		t.Errorf("first sight sent %v, want [wedged]", got)
	}
	rep, err := h.pass()
	if err != nil || rep.Verdict != state.VerdictWedged || rep.Action != state.ActionRestart {
		t.Fatalf("due: %s/%s %v", rep.Verdict, rep.Action, err)
	}
	if h.restarts() != 1 || len(rep.Restarts) != 1 || rep.Restarts[0].Outcome != state.RestartDone {
		t.Fatalf("restarts %d, report %+v", h.restarts(), rep.Restarts)
	}
	if !rep.StateWritten {
		t.Error("state not written")
	}
	s := h.store.current(t)
	if len(s.Restarts) != 1 || s.Restarts[0].Outcome != state.RestartDone || s.LastRun == nil || s.LastRun.Outcome != "ok" {
		t.Fatalf("stored restarts %+v, last run %+v", s.Restarts, s.LastRun)
	}
	if got := h.sink.events(); !contains(got, alert.EventRestarted) {
		t.Errorf("sent %v, want restarted", got)
	}
	if got := h.events.list(); !contains(got, alert.Spec(alert.EventRestarted).Reason+" Deployment/agentenv-scheduler") {
		t.Errorf("Events %v: none on the Deployment", got)
	}
}

// A restart is made only on a consistent observation: the cached one that made it
// due is read again with consistent lists (and the Deployment for the rollout
// gate), judged again, and only that judgement restarts.
func TestRestartOnlyOnTheConsistentReRead(t *testing.T) {
	for _, tc := range []struct {
		name       string
		consistent func(string, time.Time) (decide.Observation, error)
		restarted  bool
		verdict    state.Verdict
		samples    int
		log        string
	}{
		{name: "confirms the wedge", consistent: wedgedWeak, restarted: true, verdict: state.VerdictWedged, samples: 2},
		{name: "shows the nodes gone", verdict: state.VerdictNoNodes, samples: 2, consistent: func(string, time.Time) (decide.Observation, error) {
			return observation(0, schedPod(0, 11)), nil // the cache still listed 3 serving nodes
		}},
		{name: "shows the scheduler healthy", verdict: state.VerdictHealthy, samples: 2, consistent: healthy},
		{name: "fails", samples: 1, log: "consistent re-read before a restart failed", consistent: func(string, time.Time) (decide.Observation, error) {
			return decide.Observation{}, errors.New("etcdserver: request timed out")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.wedgedAndDue()
			h.obs.see = func(kind string, now time.Time) (decide.Observation, error) {
				if kind == "consistent" {
					return tc.consistent(kind, now)
				}
				return wedgedWeak(kind, now)
			}
			before := len(h.calls.list())
			rep, err := h.pass()
			if err != nil {
				t.Fatal(err)
			}
			if got := h.restarts(); got != map[bool]int{true: 1}[tc.restarted] {
				t.Fatalf("%d restarts (%s/%s: %s)", got, rep.Verdict, rep.Action, rep.Reason)
			}
			if tc.verdict != "" && rep.Verdict != tc.verdict {
				t.Errorf("verdict %s, want %s", rep.Verdict, tc.verdict)
			}
			if rep.Samples != tc.samples {
				t.Errorf("samples %d, want %d", rep.Samples, tc.samples)
			}
			// Each read once, the restart (if any) only after the consistent one.
			pass := strings.Join(h.calls.list()[before:], ",")
			want := "consistent"
			if tc.restarted {
				want = "consistent,save,restart " + podName
			}
			if strings.Count(pass, "consistent") != 1 || strings.Count(pass, "rollout") != 1 || !strings.Contains(pass, want) {
				t.Errorf("calls %s, want one consistent read, one Deployment read, and %q", pass, want)
			}
			if tc.log != "" && !strings.Contains(h.logs.String(), tc.log) {
				t.Errorf("log lacks %q", tc.log)
			}
		})
	}
}

// holdFunc reads the firing alerts that hold restarts (check.AlertHold).
type holdFunc func(ctx context.Context) *decide.FiringAlerts

func (f holdFunc) Read(ctx context.Context) *decide.FiringAlerts { return f(ctx) }

// With restarts held on firing alerts, a due restart needs three reads, which the
// decision asks for one at a time in the gate table's order: the pass takes them
// all (the Deployment, the firing alerts, the consistent re-read), each once, and
// restarts after the last. The reader alone turns the hold on.
func TestRestartTakesItsThreeReadsInTheGatesOrder(t *testing.T) {
	h := newHarness(t)
	h.wedgedAndDue()
	before := len(h.calls.list())
	r := h.runner()
	r.Hold = holdFunc(func(context.Context) *decide.FiringAlerts {
		h.calls.add("alerts")
		return &decide.FiringAlerts{Matchers: `alertname="EtcdNoLeader"`}
	})
	ctx, cancel := context.WithDeadline(context.Background(), h.clk.Now().Add(h.timeout))
	defer cancel()
	rep, err := r.Run(ctx)
	if err != nil || rep.Action != state.ActionRestart {
		t.Fatalf("%s/%s %v: %s", rep.Verdict, rep.Action, err, rep.Reason)
	}
	var reads []string
	for _, c := range h.calls.list()[before:] {
		if c == "rollout" || c == "alerts" || c == "consistent" || c == "restart "+podName {
			reads = append(reads, c)
		}
	}
	if got, want := strings.Join(reads, ","), "rollout,alerts,consistent,restart "+podName; got != want {
		t.Errorf("reads and restart %s, want %s", got, want)
	}
}

// The firing-alerts gate is on exactly when the Runner has a reader to ask:
// without one, it holds nothing and asks nobody.
func TestNoHoldWithoutAReader(t *testing.T) {
	h := newHarness(t)
	h.wedgedAndDue()
	rep, err := h.pass()
	if err != nil || rep.Action != state.ActionRestart {
		t.Fatalf("%s/%s %v: %s", rep.Verdict, rep.Action, err, rep.Reason)
	}
	for _, tg := range rep.Targets {
		for _, g := range tg.Gates {
			if g.Name == decide.GateAlerts {
				t.Errorf("%s: gate %s %q with no reader", tg.Pod, g.Name, g.Detail)
			}
		}
	}
}

// Someone writes the state between our read and our claim (the Lease keeps other
// passes out; this is a writer that ignores it): the claim conflicts and ends the
// pass, which restarts nothing.
func TestClaimLostEndsThePass(t *testing.T) {
	h := newHarness(t)
	h.wedgedAndDue()
	other := newHarness(t)
	other.clk, other.store, other.obs = h.clk, h.store, h.obs
	h.store.saveHooks = []func() error{func() error {
		_, err := other.pass()
		return err
	}}
	_, err := h.pass()
	if got := errWhat(err); got != "claim restart in state" || !errors.Is(err, statestore.ErrConflict) {
		t.Fatalf("error %v (what %q), want the claim's conflict", err, got)
	}
	if other.restarts() != 1 || h.restarts() != 0 {
		t.Fatalf("restarts: other %d, ours %d; want 1 and 0", other.restarts(), h.restarts())
	}
}

// A pass that cannot do its job fails (the CLI exits 1), names what failed,
// alerts watchdog-error, restarts nothing, and records the failure in state when
// the state can be written.
func TestFailedPasses(t *testing.T) {
	apiDown := errors.New("etcdserver: request timed out")
	fail := func() error { return apiDown }
	conflict := func() error { return statestore.ErrConflict }
	for _, tc := range []struct {
		name string
		due  bool
		// see replaces the observer; loads and saves are hooks for the next loads and saves.
		see          func(string, time.Time) (decide.Observation, error)
		loads, saves []func() error
		what         string
		msg          string
		reason       string
		// recorded: the failed run is in the stored state as lastRun outcome "error".
		recorded bool
	}{
		{name: "state unreadable", loads: []func() error{fail}, what: "read state", reason: "cannot read state"},
		{name: "pods not listable", see: podsForbidden, what: "observe", reason: "cannot list scheduler pods", recorded: true},
		{name: "final write refused", saves: []func() error{fail}, what: "write state"},
		{name: "claim refused", due: true, saves: []func() error{fail}, what: "claim restart in state", recorded: true},
		{name: "claim conflicts", due: true, what: "claim restart in state", msg: "changed since it was read", recorded: true,
			saves: []func() error{conflict}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			if tc.due {
				h.wedgedAndDue()
			} else {
				h.obs.see = healthy
			}
			if tc.see != nil {
				h.obs.see = tc.see
			}
			h.store.loadHooks, h.store.saveHooks = tc.loads, tc.saves
			before := h.store.current(t).LastRun
			sent := len(h.sink.events())

			rep, err := h.pass()
			if got := errWhat(err); got != tc.what {
				t.Fatalf("error %v (what %q), want what %q", err, got, tc.what)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %v, want %q", err, tc.msg)
			}
			if rep.Error == "" || (tc.reason != "" && rep.Reason != tc.reason) {
				t.Errorf("report error %q reason %q, want reason %q", rep.Error, rep.Reason, tc.reason)
			}
			if h.restarts() != 0 {
				t.Error("a failed pass restarted")
			}
			if got := h.sink.events()[sent:]; !contains(got, alert.EventWatchdogError) {
				t.Errorf("sent %v, want watchdog-error", got)
			}
			after := h.store.current(t).LastRun
			if recorded := after != before && after != nil && after.Outcome == "error"; recorded != tc.recorded {
				t.Errorf("failed run recorded in state: %t, want %t (last run %+v)", recorded, tc.recorded, after)
			}
			if tc.due && len(h.store.current(t).Restarts) != 0 {
				t.Errorf("a claim stayed behind: %+v", h.store.current(t).Restarts)
			}
		})
	}
}

// Every restart attempt is recorded with its outcome and says how it went: a pod
// already gone counts as done; a refused delete fails the pass (exit 1) and pages
// restart-failed.
func TestRestartOutcomes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		result  restart.Result
		err     error
		outcome state.RestartOutcome
		alert   string
		what    string
	}{
		{name: "done", result: restart.Result{Detail: "deleted pod"}, outcome: state.RestartDone, alert: alert.EventRestarted},
		{name: "already gone", result: restart.Result{Gone: true, Detail: "pod already gone"}, outcome: state.RestartDone, alert: alert.EventRestarted},
		{name: "refused", err: errors.New(`pods "agentenv-scheduler-abc12" is forbidden`), outcome: state.RestartFailed, alert: alert.EventRestartFailed, what: "restart"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.wedgedAndDue()
			h.restarter.onRestart = func(context.Context, string, string) (restart.Result, error) { return tc.result, tc.err }
			rep, err := h.pass()
			if errWhat(err) != tc.what {
				t.Fatalf("error %v, want what %q", err, tc.what)
			}
			if len(rep.Restarts) != 1 || rep.Restarts[0].Outcome != tc.outcome {
				t.Fatalf("report restarts %+v, want one %s", rep.Restarts, tc.outcome)
			}
			s := h.store.current(t)
			if len(s.Restarts) != 1 || s.Restarts[0].Outcome != tc.outcome {
				t.Errorf("stored restarts %+v, want one %s", s.Restarts, tc.outcome)
			}
			if tc.result.Gone && s.Restarts[0].Error != tc.result.Detail {
				t.Errorf("a pod already gone is not noted: %+v", s.Restarts[0])
			}
			if got := h.sink.events(); !contains(got, tc.alert) {
				t.Errorf("sent %v, want %s", got, tc.alert)
			}
			if want := tc.err == nil; contains(h.events.list(), "Deployment/") != want {
				t.Errorf("Events %v: an Event on the Deployment %t, want %t", h.events.list(), !want, want)
			}
		})
	}
}

// An alert the sink refuses is kept in the state's outbox (and an Event says so);
// the next pass delivers it first.
func TestFailedDeliveryIsRetriedNextPass(t *testing.T) {
	h := newHarness(t)
	h.sink.fail = errors.New("webhook: answered 503")
	rep, err := h.pass()
	if err != nil {
		t.Fatal(err)
	}
	if s := h.store.current(t); len(s.Outbox) != 1 || s.Outbox[0].Event != alert.EventWedged {
		t.Fatalf("outbox %+v, want the wedged alert kept", s.Outbox)
	}
	if !contains(h.events.list(), events.ReasonAlertFailed) {
		t.Errorf("Events %v: no word of the failed alert", h.events.list())
	}
	kept := false
	for _, d := range rep.Alerts {
		kept = kept || (d.Sink == "webhook" && !d.OK && d.Kept)
	}
	if !kept {
		t.Errorf("deliveries %+v: the failure is not reported as kept", rep.Alerts)
	}

	h.sink.fail = nil
	h.clk.Step(time.Minute)
	rep, err = h.pass()
	if err != nil {
		t.Fatal(err)
	}
	if got := h.sink.events(); len(got) != 1 || got[0] != alert.EventWedged {
		t.Fatalf("sent %v, want the kept wedged alert once", got)
	}
	if len(rep.Alerts) == 0 || !rep.Alerts[0].Retry || !rep.Alerts[0].OK {
		t.Errorf("deliveries %+v, want the retry first", rep.Alerts)
	}
	if s := h.store.current(t); len(s.Outbox) != 0 {
		t.Errorf("outbox %+v after delivery", s.Outbox)
	}
}

// Strong evidence is confirmed by sampling within the pass, never past the run's
// deadline (less what acting and persisting need): when the deadline cuts it
// short the pass says so and the next run continues; with time enough, the pass
// restarts on its own confirmation.
func TestConfirmationWithinTheDeadline(t *testing.T) {
	const cutShort = "the run deadline cut confirmation short"
	for _, tc := range []struct {
		name      string
		timeout   time.Duration
		action    state.Action
		restarted bool
		cut       bool
		samples   int
	}{
		// 60 s less two 10 s reserves (persisting, and the reads a restart needs
		// first): the first sight probes every 15 s while a sample fits (0, 15,
		// 30 s); the evidence is strong from 15 s, but the 90 s window from there
		// does not fit.
		{name: "cut by the deadline", timeout: time.Minute, action: state.ActionWait, cut: true, samples: 3},
		// 120 s: the sample at 105 s would confirm, but it would leave 15 s, less
		// than the two reserves, for the reads, the restart and the write: the
		// run stops at 90 s and the next run confirms (found by review).
		{name: "no restart without time for its reads", timeout: 2 * time.Minute, action: state.ActionWait, cut: true, samples: 7},
		// Strong from 15 s, confirmed at 105 s (samples every 15 s from 0 s), then
		// the consistent re-read.
		{name: "time enough", timeout: 3 * time.Minute, action: state.ActionRestart, restarted: true, samples: 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.opts.Decide.ConfirmWindow = 90 * time.Second
			h.obs.see = wedgedStrong
			h.timeout = tc.timeout
			rep, err := h.pass()
			if err != nil {
				t.Fatal(err)
			}
			if rep.Verdict != state.VerdictWedged || rep.Action != tc.action || (h.restarts() == 1) != tc.restarted {
				t.Fatalf("%s/%s, %d restarts: %s", rep.Verdict, rep.Action, h.restarts(), rep.Reason)
			}
			if contains(rep.Warnings, cutShort) != tc.cut {
				t.Errorf("warnings %q: cut short %t, want %t", rep.Warnings, !tc.cut, tc.cut)
			}
			if rep.Samples != tc.samples {
				t.Errorf("samples %d, want %d", rep.Samples, tc.samples)
			}
			if took := h.clk.Since(t0); took > tc.timeout {
				t.Errorf("the pass ran %s, past its %s deadline", took, tc.timeout)
			}
		})
	}
}

// A pass cut short by its own shutdown (context cancelled) sends nothing, pages
// no watchdog-error, logs no error, and saves what it knows with outcome
// "interrupted".
func TestShutdownSendsNothing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(h *harness, cancel context.CancelFunc)
		check func(t *testing.T, s *state.State)
	}{
		{name: "while sampling", setup: func(h *harness, cancel context.CancelFunc) {
			h.opts.Decide.ConfirmWindow = 90 * time.Second
			h.obs.see = wedgedStrong
			waits := 0
			h.clk.OnWait = func(time.Duration) bool {
				if waits++; waits == 3 {
					cancel() // SIGTERM while waiting for the next sample
					return false
				}
				return true
			}
		}, check: func(t *testing.T, s *state.State) {
			if p := s.Pods[podUID]; p == nil || p.Episode == nil {
				t.Errorf("what the pass observed was not kept: %+v", p)
			}
		}},
		{name: "while restarting", setup: func(h *harness, cancel context.CancelFunc) {
			h.wedgedAndDue()
			h.restarter.onRestart = func(ctx context.Context, _, _ string) (restart.Result, error) {
				cancel()
				return restart.Result{}, ctx.Err()
			}
		}, check: func(t *testing.T, s *state.State) {
			// Whether the delete reached the API server is unknown: the claim stays
			// for the next run to settle.
			if len(s.Restarts) != 1 || s.Restarts[0].Outcome != state.RestartClaimed {
				t.Errorf("restarts %+v, want the claim left", s.Restarts)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			ctx, cancel := context.WithDeadline(context.Background(), t0.Add(time.Hour))
			defer cancel()
			tc.setup(h, cancel)
			sent, evs := len(h.sink.events()), len(h.events.list())
			h.logs.Reset()

			rep, err := h.runner().Run(ctx)
			if !errors.Is(err, check.ErrInterrupted) || rep.Error != check.ErrInterrupted.Error() {
				t.Fatalf("error %v, report %q: want the pass cut short", err, rep.Error)
			}
			if got := h.sink.events()[sent:]; len(got) != 0 {
				t.Errorf("a shutdown sent %v", got)
			}
			if got := h.events.list()[evs:]; len(got) != 0 {
				t.Errorf("a shutdown left Events %v", got)
			}
			if strings.Contains(h.logs.String(), `"level":"error"`) {
				t.Errorf("a shutdown logged errors:\n%s", h.logs)
			}
			s := h.store.current(t)
			if s.LastRun == nil || s.LastRun.Outcome != "interrupted" || !rep.StateWritten {
				t.Fatalf("last run %+v (state written %t), want outcome interrupted", s.LastRun, rep.StateWritten)
			}
			tc.check(t, s)
		})
	}
}

// A restart record on the pod's own UID dated a year ahead (a run whose node
// clock ran ahead and died between claim and delete) does not hold the restart
// back, and the pass records the outcome on the restart it claimed, not on that
// record: saving the state sorts the records by claim time, which puts the one
// dated ahead last. Checked before the fix: no restart ("restart already in
// progress"), no restart-blocked page; and with only the decision fixed, the
// year-ahead record was marked done and this pass's own claim left claimed.
func TestFutureRestartRecordOfThePodDoesNotBlockTheRestart(t *testing.T) {
	for _, outcome := range []state.RestartOutcome{state.RestartClaimed, state.RestartDone} {
		t.Run(string(outcome), func(t *testing.T) {
			h := newHarness(t)
			ahead := t0.Add(365 * 24 * time.Hour)
			rec := state.Restart{Pod: podName, UID: podUID, Method: decide.MethodDelete, ClaimedAt: ahead, Outcome: outcome, Reason: "dated ahead"}
			if outcome == state.RestartDone {
				rec.DoneAt = &ahead
			}
			seed := state.New()
			seed.Restarts = append(seed.Restarts, rec)
			if err := h.store.MemoryStore.Save(context.Background(), &statestore.Snapshot{}, seed, t0); err != nil {
				t.Fatal(err)
			}
			h.wedgedAndDue()
			rep, err := h.pass()
			if err != nil || rep.Action != state.ActionRestart || h.restarts() != 1 {
				t.Fatalf("%s/%s, %d restarts, %v: want the pod restarted", rep.Verdict, rep.Action, h.restarts(), err)
			}
			if !contains(rep.Warnings, "dated in the future") {
				t.Errorf("warnings %q: the record dated ahead is not named", rep.Warnings)
			}
			s := h.store.current(t)
			var ours, theirs int
			for _, r := range s.Restarts {
				switch {
				case r.Reason == "dated ahead" && r.Outcome == outcome && r.ClaimedAt.Equal(ahead):
					theirs++
				case r.UID == podUID && r.Outcome == state.RestartDone && !r.ClaimedAt.After(h.clk.Now()):
					ours++
				}
			}
			if ours != 1 || theirs != 1 || len(s.Restarts) != 2 {
				t.Errorf("stored restarts %+v: want this pass's done and the record dated ahead as it was", s.Restarts)
			}
		})
	}
}
