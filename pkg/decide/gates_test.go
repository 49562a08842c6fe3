package decide

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/agentenv/watchdog/pkg/state"
)

// The restart gates are pure: each answers from the case it is given and writes
// nothing, neither the state nor the episode:
// recording what a restart did (ineffective, healed) is a step of judging a pod,
// never a side effect of asking whether a restart may go ahead. Every gate of the
// table, and the wedged-for gate, is asked about every combination of the state's
// restart records, back-off and episodes, and of the observation's reads, and the
// state must come out as it went in.
func TestGatesDoNotWriteState(t *testing.T) {
	cfg := testConfig()
	cfg.IneffectiveWithin, cfg.BackoffBase, cfg.BackoffMax, cfg.BackoffReset = DefaultIneffectiveWithin, DefaultBackoffBase, DefaultBackoffMax, DefaultBackoffReset
	now := t0
	ago := func(d time.Duration) *time.Time { at := now.Add(-d); return &at }
	rejected := uint64(3)
	episode := func(kind Verdict, strong bool) *state.OpenEpisode {
		e := &state.OpenEpisode{Kind: kind, Since: now.Add(-5 * time.Minute), Last: now.Add(-15 * time.Second), For: state.Duration(4 * time.Minute),
			Evidence: EvidenceWeak, BaselineRejected: &rejected, RunSince: ago(time.Minute), Run: now.Add(-time.Minute), ConfirmedRun: ago(6 * time.Minute), ConfirmedRuns: 1}
		if strong {
			e.StrongSince, e.Evidence = ago(2*time.Minute), EvidenceStrong
		}
		return e
	}
	restart := func(outcome state.RestartOutcome, claimed time.Duration) state.Restart {
		r := state.Restart{Pod: "sched-a", UID: "uid-a", Method: MethodDelete, ClaimedAt: now.Add(-claimed), Outcome: outcome}
		if outcome == state.RestartDone {
			r.DoneAt = ago(claimed)
		}
		return r
	}
	resumed := restart(state.RestartClaimed, 10*time.Minute)
	resumed.ResumedAt = ago(time.Minute)
	states := map[string]func(s *state.State){
		"empty":                 func(*state.State) {},
		"claimed by a live run": func(s *state.State) { s.Restarts = []state.Restart{restart(state.RestartClaimed, time.Minute)} },
		"unfinished claim":      func(s *state.State) { s.Restarts = []state.Restart{restart(state.RestartClaimed, 10*time.Minute)} },
		"claim taken over":      func(s *state.State) { s.Restarts = []state.Restart{resumed} },
		"restart just done":     func(s *state.State) { s.Restarts = []state.Restart{restart(state.RestartDone, time.Minute)} },
		"restart done long ago": func(s *state.State) { s.Restarts = []state.Restart{restart(state.RestartDone, 30*time.Minute)} },
		"restart failed":        func(s *state.State) { s.Restarts = []state.Restart{restart(state.RestartFailed, 30*time.Minute)} },
		"budget spent": func(s *state.State) {
			for i := range 3 {
				r := restart(state.RestartDone, time.Duration(10+i)*time.Minute)
				r.UID = fmt.Sprint("old-", i)
				s.Restarts = append(s.Restarts, r)
			}
		},
		"backing off": func(s *state.State) {
			s.Backoff = &state.Backoff{Ineffective: 2, LastRestartAt: now.Add(-5 * time.Minute), NotBefore: now.Add(15 * time.Minute), Reason: "did not heal"}
		},
		"back-off over, healthy since": func(s *state.State) {
			s.Backoff = &state.Backoff{Ineffective: 1, LastRestartAt: now.Add(-time.Hour), NotBefore: now.Add(-50 * time.Minute), Reason: "did not heal", HealthySince: ago(10 * time.Minute)}
		},
	}
	obs := map[string]func(o *Observation){
		"consistent":             func(o *Observation) {},
		"from the cache":         func(o *Observation) { o.Consistent = false },
		"consistent read failed": func(o *Observation) { o.Consistent, o.ConsistentErr = false, errors.New("etcd leader changed") },
		"Deployment not read":    func(o *Observation) { o.Rollout = nil },
		"Deployment unreadable":  func(o *Observation) { o.Rollout = &Rollout{Name: "d", Err: errors.New("forbidden")} },
		"Deployment rolling out": func(o *Observation) { o.Rollout = &Rollout{Name: "d", Found: true, InProgress: true} },
	}
	for sname, setState := range states {
		for oname, setObs := range obs {
			for _, ep := range []struct {
				kind   Verdict
				strong bool
			}{{VerdictWedged, true}, {VerdictWedged, false}, {VerdictDegraded, false}} {
				s := state.New()
				setState(s)
				e := episode(ep.kind, ep.strong)
				s.Pods["uid-a"] = &state.Pod{Name: "sched-a", StartedAt: started, FirstSeen: started, LastSeen: now, LastVerdict: ep.kind, Episode: e}
				o := observe(now, 3, schedPod("sched-a", "uid-a", sample(0, 9)))
				setObs(&o)
				before := s.Clone()
				for _, resume := range []bool{false, true} {
					c := &gateCase{pod: o.Pods[0], obs: o, state: s, cfg: cfg, now: now, judged: 1, resume: resume}
					for _, g := range restartGates {
						g.check(c)
						if !reflect.DeepEqual(s, before) {
							t.Fatalf("state %q, observation %q, %s episode: gate %s wrote the state:\nbefore %+v\nafter  %+v", sname, oname, ep.kind, g.name, before, s)
						}
					}
					var tg Target
					runGates(&tg, c)
					restartDue(&Target{}, c, e)
					if !reflect.DeepEqual(s, before) {
						t.Fatalf("state %q, observation %q, %s episode: the wedged-for gate or runGates wrote the state", sname, oname, ep.kind)
					}
				}
			}
		}
	}
}
