package decide_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/watchdog/internal/podtest"
	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/state"
)

// Clock skew: the clocks of the scheduler's node, of the
// Lease holder's node and of the watchdog's may disagree.

// A scheduler node whose clock runs ahead dates its container's start in the
// future. Checked: not unknown forever, but unknown until the watchdog's clock
// caught up with the skew (an hour ahead: an hour blind). Fixed: once the
// watchdog has watched the process for --startup-grace by its own clock, the
// process is at least that old, and it is judged.
func TestNodeClockAheadIsJudgedAfterTheGraceByOurClock(t *testing.T) {
	cfg := testConfig()
	for _, ahead := range []time.Duration{2 * time.Minute, 10 * time.Minute, time.Hour} {
		t.Run(ahead.String(), func(t *testing.T) {
			start := t0 // the container's real start
			s := state.New()
			judgedAt := time.Duration(-1)
			for run := 0; run < 24; run++ {
				now := start.Add(30*time.Second + time.Duration(run)*5*time.Minute)
				p := schedPod("sched-a", "uid-a", podtest.Sample(0, 0))
				p.StartedAt = start.Add(ahead) // stamped by the node's clock
				var r decide.Result
				s, r = decide.Decide(observe(now, 3, p), s, cfg)
				decide.CountRun(s, r.Verdict)
				if r.Verdict == state.VerdictWedged && judgedAt < 0 {
					judgedAt = now.Sub(start)
					if p.StartedAt.After(now.Add(decide.ClockSkewTolerance)) && len(r.Targets[0].Warnings) == 0 {
						t.Errorf("judged without a warning that the node's clock runs ahead: %+v", r.Targets[0])
					}
				}
			}
			if judgedAt < 0 || judgedAt > 6*time.Minute {
				t.Fatalf("a node clock %s ahead: first judged %s after the start (want by the second run)", ahead, judgedAt)
			}
		})
	}
}

// A Lease holder whose clock lags writes renewTime in the past at every renewal.
// Checked: real, the Lease named no leader forever (nobody judged, never healed).
// Fixed: the API server's time of the holder's last write of renewTime
// (managedFields) is when it was renewed, whatever the holder's clock says; and a
// holder whose clock runs ahead no longer looks alive after it stopped renewing.
func TestLeaseRenewalByTheAPIServersClock(t *testing.T) {
	cfg := testConfig()
	cfg.LeaderLease = "agentenv-scheduler"
	for _, tc := range []struct {
		name    string
		leader  decide.Leader
		verdict state.Verdict
	}{
		{"holder's clock 5 min behind, renewing", decide.Leader{Holder: "sched-a", RenewedAt: t0.Add(-5 * time.Minute), WrittenAt: t0.Add(-2 * time.Second), Duration: 15 * time.Second}, state.VerdictWedged},
		{"holder's clock an hour ahead, stopped renewing 10 min ago", decide.Leader{Holder: "sched-a", RenewedAt: t0.Add(50 * time.Minute), WrittenAt: t0.Add(-10 * time.Minute), Duration: 15 * time.Second}, state.VerdictUnknown},
		{"no write time known: renewTime as before", decide.Leader{Holder: "sched-a", RenewedAt: t0.Add(-5 * time.Minute), Duration: 15 * time.Second}, state.VerdictUnknown},
		{"no write time known, fresh", decide.Leader{Holder: "sched-a", RenewedAt: t0.Add(-5 * time.Second), Duration: 15 * time.Second}, state.VerdictWedged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := observe(t0, 3, schedPod("sched-a", "uid-a", podtest.Sample(0, 0)))
			l := tc.leader
			o.Leader = &l
			_, r := decide.Decide(o, state.New(), cfg)
			if r.Verdict != tc.verdict {
				t.Errorf("%s: %s (%s)", tc.name, r.Verdict, r.Reason)
			}
		})
	}
}

// Restart records dated in the future (written by a run on a
// node whose clock ran ahead, or by an edit of the state ConfigMap) are not
// counted in the restart budget until their date comes, within
// ClockSkewTolerance; a run that sees them warns. Replayed as */5 runs over three
// hours: the state holds a full budget (3 in 1h) of records dated `ahead` of the
// first run; the scheduler wedges at +0 and, after its restart, again at +80m.
// Checked: each record counted from the first run on, so a year-ahead edit turned
// healing off for a year (and a 5-minute skew held the first restart for an hour).
func TestFutureRestartRecordsDoNotSpendTheBudget(t *testing.T) {
	cfg := testConfig()
	cfg.WedgedFor = 150 * time.Second
	for _, tc := range []struct {
		ahead time.Duration
		// restarts: when the runs restarted; warned: the runs that warned.
		restarts []time.Duration
		warned   int
	}{
		// Within the tolerance: a clock that disagrees by seconds, counted.
		{ahead: 30 * time.Second, restarts: []time.Duration{60 * time.Minute, 80 * time.Minute}},
		// Counted once their date comes, for a window from then.
		{ahead: 5 * time.Minute, restarts: []time.Duration{0, 80 * time.Minute}, warned: 1},
		{ahead: time.Hour, restarts: []time.Duration{0, 120 * time.Minute}, warned: 12},
		{ahead: 365 * 24 * time.Hour, restarts: []time.Duration{0, 80 * time.Minute}, warned: 36},
	} {
		t.Run(decide.ShortDuration(tc.ahead)+" ahead", func(t *testing.T) {
			s := state.New()
			for i := range cfg.MaxRestarts {
				at := t0.Add(tc.ahead + time.Duration(i)*time.Second)
				s.Restarts = append(s.Restarts, state.Restart{Pod: "sched-old", UID: fmt.Sprintf("uid-old-%d", i), Method: decide.MethodDelete, ClaimedAt: at, DoneAt: &at, Outcome: state.RestartDone})
			}
			n := 0
			cur, started := "sched-0", t0.Add(-time.Hour)
			at := func(now time.Time) decide.Observation {
				p := schedPod(cur, "uid-"+cur, podtest.Sample(0, 0))
				if n == 1 && now.Before(t0.Add(80*time.Minute)) {
					p.Sample = podtest.Sample(3, 0) // the first replacement is healthy until a new flap at +80m
				} else if n > 1 {
					p.Sample = podtest.Sample(3, 0)
				}
				p.StartedAt = started
				return observe(now, 3, p)
			}
			var restarts []time.Duration
			warned := 0
			for i := 0; i < 36; i++ {
				start := t0.Add(time.Duration(i) * 5 * time.Minute)
				var r decide.Result
				s, r, _ = run(cfg, s, start, 170*time.Second, at)
				future := slices.ContainsFunc(r.Warnings, func(w string) bool { return strings.Contains(w, "dated in the future") })
				if future {
					warned++
				}
				if ahead := t0.Add(tc.ahead).Sub(start); future != (ahead > decide.ClockSkewTolerance) {
					t.Errorf("run at +%s, records %s ahead: warnings %q", start.Sub(t0), ahead, r.Warnings)
				}
				if r.Action == state.ActionRestart {
					restarts = append(restarts, start.Sub(t0))
					done := start.Add(150 * time.Second)
					s.Restarts = append(s.Restarts, state.Restart{Pod: cur, UID: "uid-" + cur, Method: decide.MethodDelete, ClaimedAt: done, DoneAt: &done, Outcome: state.RestartDone})
					n++
					cur, started = fmt.Sprintf("sched-%d", n), done.Add(10*time.Second)
				}
			}
			if !slices.Equal(restarts, tc.restarts) || warned != tc.warned {
				t.Errorf("restarts at %v, %d runs warned; want restarts at %v, %d warned", restarts, warned, tc.restarts, tc.warned)
			}
		})
	}
}

// The same for the back-off: its end is at most --restart-backoff-max after the
// restart that did not heal, which is no later than now. An end further ahead
// than that (a restart record dated ahead, an edit) is ignored, with a warning;
// counted, an end dated a year ahead turned healing off for a year.
func TestBackoffBeyondItsMaximumIsIgnored(t *testing.T) {
	cfg := testConfig()
	cfg.WedgedFor = 150 * time.Second
	cfg.IneffectiveWithin, cfg.BackoffBase, cfg.BackoffMax, cfg.BackoffReset = decide.DefaultIneffectiveWithin, decide.DefaultBackoffBase, decide.DefaultBackoffMax, decide.DefaultBackoffReset
	for _, tc := range []struct {
		ahead   time.Duration
		blocked bool
	}{
		{30 * time.Minute, true},
		{decide.DefaultBackoffMax, true},
		{decide.DefaultBackoffMax + decide.ClockSkewTolerance, true},
		{decide.DefaultBackoffMax + 2*decide.ClockSkewTolerance, false},
		{365 * 24 * time.Hour, false},
	} {
		t.Run(decide.ShortDuration(tc.ahead)+" ahead", func(t *testing.T) {
			s := state.New()
			decided := t0.Add(cfg.WedgedFor) // the run's last sample, where the restart is due
			s.Backoff = &state.Backoff{Ineffective: 4, LastRestartAt: t0.Add(-time.Minute), NotBefore: decided.Add(tc.ahead)}
			_, r, _ := run(cfg, s, t0, 170*time.Second, wedgedAt)
			warned := slices.ContainsFunc(r.Warnings, func(w string) bool { return strings.Contains(w, "back-off") })
			if blocked := r.Action == state.ActionBlocked; blocked != tc.blocked || warned == tc.blocked {
				t.Errorf("back-off ending %s ahead: %s (%s), warnings %q; want blocked %v, a warning %v", tc.ahead, r.Action, r.Reason, r.Warnings, tc.blocked, !tc.blocked)
			}
		})
	}
}

// A restart record on the judged pod's own UID dated beyond ClockSkewTolerance in
// the future (a `claimed` or `done` written by a run whose node clock ran ahead
// and died between claim and delete, or an edit of the state ConfigMap) does not
// count, as the budget gate already treats it: it neither says "restart in
// progress" nor "already restarted", and every run warns while it is ahead.
// Replayed as */5 runs over three hours of a strong wedge from t0; after a
// restart the replacement (a new UID) is healthy. Checked before the fix: a
// record a year ahead left every run blocked "restart in progress" (no restart,
// no restart-blocked page) for the whole three hours.
func TestFutureRestartRecordOfThePodDoesNotBlockItsRestart(t *testing.T) {
	cfg := testConfig()
	year := 365 * 24 * time.Hour
	for _, tc := range []struct {
		name              string
		outcome           state.RestartOutcome
		claimed, done     time.Duration // from t0; done 0: no DoneAt
		first             time.Duration // the first run that restarts or pages blocked
		action            state.Action
		silentRuns, warns int
	}{
		// Within the tolerance the record counts, as before: another run's claim
		// is completed once it is older than --claim-timeout; a done restart that
		// left the pod in place is a blocked restart, paged.
		{name: "claimed 30s ahead", outcome: state.RestartClaimed, claimed: 30 * time.Second, first: 5 * time.Minute, action: state.ActionRestart, silentRuns: 1},
		{name: "done 30s ahead", outcome: state.RestartDone, claimed: 30 * time.Second, done: 30 * time.Second, first: 5 * time.Minute, action: state.ActionBlocked, silentRuns: 1},
		{name: "claimed 5m ahead", outcome: state.RestartClaimed, claimed: 5 * time.Minute, first: 0, action: state.ActionRestart, warns: 1},
		{name: "claimed a year ahead", outcome: state.RestartClaimed, claimed: year, first: 0, action: state.ActionRestart, warns: 36},
		{name: "done a year ahead", outcome: state.RestartDone, claimed: year, done: year, first: 0, action: state.ActionRestart, warns: 36},
		{name: "claimed 2m ago, done a year ahead", outcome: state.RestartDone, claimed: -2 * time.Minute, done: year, first: 0, action: state.ActionRestart, warns: 36},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := state.New()
			rec := state.Restart{Pod: "sched-a", UID: "uid-a", Method: decide.MethodDelete, ClaimedAt: t0.Add(tc.claimed), Outcome: tc.outcome}
			if tc.done != 0 {
				done := t0.Add(tc.done)
				rec.DoneAt = &done
			}
			s.Restarts = append(s.Restarts, rec)
			replaced := false
			at := func(now time.Time) decide.Observation {
				if replaced {
					p := schedPod("sched-b", "uid-b", podtest.Sample(3, 0))
					p.StartedAt = t0
					return observe(now, 3, p)
				}
				return wedgedRising(now)
			}
			first, action := time.Duration(-1), state.Action("")
			silent, warned := 0, 0
			for i := 0; i < 36; i++ {
				start := t0.Add(time.Duration(i) * 5 * time.Minute)
				var r decide.Result
				s, r, _ = run(cfg, s, start, 170*time.Second, at)
				if slices.ContainsFunc(r.Warnings, func(w string) bool { return strings.Contains(w, "dated in the future") }) {
					warned++
				}
				tg := r.Targets[0]
				if tg.RestartInProgress() {
					silent++
				}
				if first < 0 && (tg.Action == state.ActionRestart || (tg.Action == state.ActionBlocked && !tg.RestartInProgress())) {
					first, action = start.Sub(t0), tg.Action
				}
				if tg.Action == state.ActionRestart {
					// As the pass records it: the claim, done, saved (which sorts
					// the records by claim time); the replacement is healthy.
					now := start.Add(2 * time.Minute)
					s.Restarts = append(s.Restarts, state.Restart{Pod: tg.Pod, UID: tg.UID, Method: decide.MethodDelete, ClaimedAt: now, DoneAt: &now, Outcome: state.RestartDone})
					s.Prune(now)
					replaced = true
				}
			}
			if first != tc.first || action != tc.action || silent != tc.silentRuns || warned != tc.warns {
				t.Errorf("first %s at +%s, %d runs blocked silently as in progress, %d warned; want %s at +%s, %d silent, %d warned",
					action, first, silent, warned, tc.action, tc.first, tc.silentRuns, tc.warns)
			}
		})
	}
}

// wedgedRising is a wedge with strong evidence: rejected heartbeats rise by one
// every 5 s.
func wedgedRising(at time.Time) decide.Observation {
	return observe(at, 3, schedPod("sched-a", "uid-a", podtest.Sample(0, 100+uint64(at.Sub(t0)/(5*time.Second)))))
}

// The watchdog's clock runs 25 s ahead of the API server's and the kubelet's: its
// claim is dated after the replacement started. Checked: the replacement was not
// recognised, so back-off and restart-ineffective never engaged. Fixed: the
// restart's time by the API server (ServerAt) is compared with the replacement's
// creationTimestamp, both by the API server's clock.
func TestReplacementRecognisedDespiteClockSkew(t *testing.T) {
	cfg := testConfig()
	cfg.IneffectiveWithin, cfg.BackoffBase, cfg.BackoffMax, cfg.BackoffReset = 15*time.Minute, 10*time.Minute, time.Hour, time.Hour
	deleted, claimed := t0, t0.Add(25*time.Second) // by the API server, by the watchdog
	s := state.New()
	s.Restarts = []state.Restart{{Pod: "sched-0", UID: "uid-0", Method: decide.MethodDelete, ClaimedAt: claimed, DoneAt: &claimed, ServerAt: &deleted, Outcome: state.RestartDone}}
	p := func(at time.Time) decide.Observation {
		pod := schedPod("sched-1", "uid-1", podtest.Sample(0, 0))
		pod.CreatedAt, pod.StartedAt = t0.Add(time.Second), t0.Add(3*time.Second)
		return observe(at, 3, pod)
	}
	s, _ = decide.Decide(p(t0.Add(3*time.Minute)), s, cfg)
	_, r := decideRun(cfg, s, t0.Add(8*time.Minute), p)
	if r.Targets[0].Ineffective == "" || !r.Targets[0].OnlyBackoff() {
		t.Fatalf("the replacement was not recognised: %s %s", r.Action, r.Reason)
	}
	if !strings.Contains(r.Targets[0].Ineffective, "started 1s later") {
		t.Errorf("the gap by the API server's clock, not across two clocks: %s", r.Targets[0].Ineffective)
	}
}
