package decide

import (
	"testing"
	"time"

	"github.com/agentenv/watchdog/pkg/state"
)

// Clock skew (issue 17, "check"): the clocks of the scheduler's node, of the
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
				p := schedPod("sched-a", "uid-a", sample(0, 0))
				p.StartedAt = start.Add(ahead) // stamped by the node's clock
				var r Result
				s, r = Decide(observe(now, 3, p), s, cfg)
				CountRun(s, r.Verdict)
				if r.Verdict == VerdictWedged && judgedAt < 0 {
					judgedAt = now.Sub(start)
					if p.StartedAt.After(now.Add(ClockSkewTolerance)) && len(r.Targets[0].Warnings) == 0 {
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
		leader  Leader
		verdict Verdict
	}{
		{"holder's clock 5 min behind, renewing", Leader{Holder: "sched-a", RenewedAt: t0.Add(-5 * time.Minute), WrittenAt: t0.Add(-2 * time.Second), Duration: 15 * time.Second}, VerdictWedged},
		{"holder's clock an hour ahead, stopped renewing 10 min ago", Leader{Holder: "sched-a", RenewedAt: t0.Add(50 * time.Minute), WrittenAt: t0.Add(-10 * time.Minute), Duration: 15 * time.Second}, VerdictUnknown},
		{"no write time known: renewTime as before", Leader{Holder: "sched-a", RenewedAt: t0.Add(-5 * time.Minute), Duration: 15 * time.Second}, VerdictUnknown},
		{"no write time known, fresh", Leader{Holder: "sched-a", RenewedAt: t0.Add(-5 * time.Second), Duration: 15 * time.Second}, VerdictWedged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := observe(t0, 3, schedPod("sched-a", "uid-a", sample(0, 0)))
			l := tc.leader
			o.Leader = &l
			_, r := Decide(o, state.New(), cfg)
			if r.Verdict != tc.verdict {
				t.Errorf("%s: %s (%s)", tc.name, r.Verdict, r.Reason)
			}
		})
	}
}
