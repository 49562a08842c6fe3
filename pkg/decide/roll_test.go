package decide_test

import (
	"testing"
	"time"

	"github.com/agentenv/watchdog/internal/podtest"
	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/state"
)

// rejectedBy is one node's rejected heartbeats d after its first: back-off 5 s
// doubling to 60 s (docs/design.md §1).
func rejectedBy(d time.Duration) uint64 {
	if d < 0 {
		return 0
	}
	n := uint64(0)
	for _, o := range []time.Duration{0, 5 * time.Second, 15 * time.Second, 35 * time.Second, 75 * time.Second} {
		if d >= o {
			n++
		}
	}
	if d > 75*time.Second {
		n += uint64((d - 75*time.Second) / time.Minute)
	}
	return n
}

// runs replays passes every 30 s from t0 until end, each sampling as pkg/check
// does (budget 3 min), the first pass after the cause at first; it returns the
// time of the first restart (zero: none) and the samples taken after the cause.
func runs(cfg decide.Config, cause, first, end time.Time, at func(time.Time) decide.Observation) (time.Time, int) {
	s, samples := state.New(), 0
	for start := t0; start.Before(end); {
		if start.Before(cause) && start.Add(30*time.Second).After(cause) {
			// the pass the watch brings forward, or the interval's
			s, _, _ = run(cfg, s, start, 3*time.Minute, at)
			start = first
			continue
		}
		var r decide.Result
		var n int
		s, r, n = run(cfg, s, start, 3*time.Minute, at)
		if !start.Before(cause) {
			samples += n
		}
		if r.Action == state.ActionRestart {
			return start.Add(time.Duration(n-1) * decide.DefaultSampleInterval), samples
		}
		start = start.Add(max(30*time.Second, time.Duration(n)*decide.DefaultSampleInterval))
	}
	return time.Time{}, samples
}

// Nodes roll into a dead discovery: the new nodes are rejected at once, the
// gauge keeps counting the old nodes' records until it drops them 40-55 s later.
// Over every phase of the first pass after the roll (0-15 s, the early pass of
// the EndpointSlice watch or the interval's) and every gauge lag, strong
// evidence counts from the first rejected heartbeats seen: restarted within the
// confirm window plus one sample of that first sight, never before the window.
func TestARollIntoDeadDiscoveryCountsFromItsFirstRejections(t *testing.T) {
	cfg := testConfig()
	cause := t0.Add(10*time.Minute + time.Second) // a second after a pass
	for drop := 40 * time.Second; drop <= 55*time.Second; drop += 5 * time.Second {
		at := func(now time.Time) decide.Observation {
			ready := 3
			if now.Sub(cause) >= drop {
				ready = 0
			}
			return observe(now, 3, schedPod("sched-a", "uid-a", podtest.Sample(ready, 3*rejectedBy(now.Sub(cause)))))
		}
		for lag := 0 * time.Second; lag < 15*time.Second; lag += time.Second {
			first := cause.Add(lag)
			restart, _ := runs(cfg, cause, first, cause.Add(10*time.Minute), at)
			if restart.IsZero() {
				t.Fatalf("gauge drop %s, first pass %s after the roll: never restarted", drop, lag)
			}
			if d := restart.Sub(first); d < cfg.ConfirmWindow || d > cfg.ConfirmWindow+decide.DefaultSampleInterval {
				t.Errorf("gauge drop %s, first pass %s after the roll: restarted %s after it, want the confirm window %s (+ a sample)", drop, lag, d, cfg.ConfirmWindow)
			}
		}
	}
}

// An API-server flap: ready 0 from the next gauge refresh, heartbeats rejected
// until the informer recovers, then accepted (and ready back from the next
// refresh). Whatever the phase of the passes, one that heals within 90 s is
// never restarted: a flap never shows rejections rising with ready unchanged
// across a refresh, so its strong evidence counts from ready 0 as before.
func TestAFlapIsNotTakenForARoll(t *testing.T) {
	cfg := testConfig()
	cause := t0.Add(10*time.Minute + time.Second) // a second after a pass
	for heal := 30 * time.Second; heal <= 90*time.Second; heal += 15 * time.Second {
		for tick := time.Duration(0); tick < 15*time.Second; tick += 3 * time.Second {
			at := func(now time.Time) decide.Observation {
				in := now.Sub(cause)
				ready := 3
				if in >= tick && in < heal+tick { // the gauge's refresh phase
					ready = 0
				}
				rejected := 3 * rejectedBy(min(in, heal))
				return observe(now, 3, schedPod("sched-a", "uid-a", podtest.Sample(ready, rejected)))
			}
			for lag := 0 * time.Second; lag < 15*time.Second; lag += 2 * time.Second {
				if restart, _ := runs(cfg, cause, cause.Add(lag), cause.Add(10*time.Minute), at); !restart.IsZero() {
					t.Errorf("a flap healing after %s (gauge tick %s, first pass %s): restarted %s after it", heal, tick, lag, restart.Sub(cause))
				}
			}
		}
	}
}

// A node that calls in but is none of the Service's has its heartbeats rejected
// for good while ready counts every serving node: followed once per RollRearm,
// it makes a pass sample on for RollWatch at most that often (an hour of
// passes every 30 s samples at most 120 + 6 × 5 times), and is never restarted.
func TestAStrayNodeCostsOneFollowedRollPerRearm(t *testing.T) {
	cfg := testConfig()
	cause := t0.Add(10*time.Minute + time.Second) // a second after a pass
	at := func(now time.Time) decide.Observation {
		return observe(now, 3, schedPod("sched-a", "uid-a", podtest.Sample(3, rejectedBy(now.Sub(cause)))))
	}
	restart, samples := runs(cfg, cause, cause, cause.Add(time.Hour), at)
	if !restart.IsZero() {
		t.Fatalf("a stray node was restarted at %s", restart.Sub(cause))
	}
	if limit := 120 + 6*int(decide.RollWatch/(decide.DefaultSampleInterval)+1); samples > limit {
		t.Errorf("%d samples in an hour of a stray node, want at most %d", samples, limit)
	}
	t.Logf("an hour of a stray node rejected for good: %d samples (120 without it)", samples)
}
