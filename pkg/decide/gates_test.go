package decide_test

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/agentenv/watchdog/internal/podtest"
	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/state"
)

// The restart gates are pure: each answers from the judged pod it is given and writes
// nothing, neither the state nor the episode:
// recording what a restart did (ineffective, healed) is a step of judging a pod,
// never a side effect of asking whether a restart may go ahead. Every gate of the
// table, and the wedged-for gate, is asked about every combination of the state's
// restart records, back-off and episodes, and of the observation's reads, and the
// state must come out as it went in.
func TestGatesDoNotWriteState(t *testing.T) {
	cfg := testConfig()
	cfg.IneffectiveWithin, cfg.BackoffBase, cfg.BackoffMax, cfg.BackoffReset = decide.DefaultIneffectiveWithin, decide.DefaultBackoffBase, decide.DefaultBackoffMax, decide.DefaultBackoffReset
	now := t0
	ago := func(d time.Duration) *time.Time { at := now.Add(-d); return &at }
	rejected := uint64(3)
	episode := func(kind state.Verdict, strong bool) *state.OpenEpisode {
		e := &state.OpenEpisode{Kind: kind, Since: now.Add(-5 * time.Minute), Last: now.Add(-15 * time.Second), For: state.Duration(4 * time.Minute),
			Evidence: state.EvidenceWeak, BaselineRejected: &rejected, RunSince: ago(time.Minute), Run: now.Add(-time.Minute), ConfirmedRun: ago(6 * time.Minute), ConfirmedRuns: 1}
		if strong {
			e.StrongSince, e.Evidence = ago(2*time.Minute), state.EvidenceStrong
		}
		return e
	}
	restart := func(outcome state.RestartOutcome, claimed time.Duration) state.Restart {
		r := state.Restart{Pod: "sched-a", UID: "uid-a", Method: decide.MethodDelete, ClaimedAt: now.Add(-claimed), Outcome: outcome}
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
			s.Backoff = &state.Backoff{Ineffective: 2, LastRestartAt: now.Add(-5 * time.Minute), NotBefore: now.Add(15 * time.Minute)}
		},
		"back-off over, healthy since": func(s *state.State) {
			s.Backoff = &state.Backoff{Ineffective: 1, LastRestartAt: now.Add(-time.Hour), NotBefore: now.Add(-50 * time.Minute), HealthySince: ago(10 * time.Minute)}
		},
	}
	obs := map[string]func(o *decide.Observation){
		"consistent":             func(o *decide.Observation) {},
		"from the cache":         func(o *decide.Observation) { o.Consistent = false },
		"consistent read failed": func(o *decide.Observation) { o.Consistent, o.ConsistentErr = false, errors.New("etcd leader changed") },
		"Deployment not read":    func(o *decide.Observation) { o.Rollout = nil },
		"Deployment unreadable":  func(o *decide.Observation) { o.Rollout = &decide.Rollout{Name: "d", Err: errors.New("forbidden")} },
		"Deployment rolling out": func(o *decide.Observation) { o.Rollout = &decide.Rollout{Name: "d", Found: true, InProgress: true} },
	}
	for sname, setState := range states {
		for oname, setObs := range obs {
			for _, ep := range []struct {
				kind   state.Verdict
				strong bool
			}{{state.VerdictWedged, true}, {state.VerdictWedged, false}, {state.VerdictDegraded, false}} {
				s := state.New()
				setState(s)
				e := episode(ep.kind, ep.strong)
				s.Pods["uid-a"] = &state.Pod{Name: "sched-a", StartedAt: started, FirstSeen: started, LastSeen: now, LastVerdict: ep.kind, Episode: e}
				o := observe(now, 3, schedPod("sched-a", "uid-a", podtest.Sample(0, 9)))
				setObs(&o)
				before := s.Clone()
				for _, resume := range []bool{false, true} {
					decide.EveryGate(o, s, cfg, resume, func(gate string) {
						if !reflect.DeepEqual(s, before) {
							t.Fatalf("state %q, observation %q, %s episode: gate %s wrote the state:\nbefore %+v\nafter  %+v", sname, oname, ep.kind, gate, before, s)
						}
					})
					if !reflect.DeepEqual(s, before) {
						t.Fatalf("state %q, observation %q, %s episode: the wedged-for gate or runGates wrote the state", sname, oname, ep.kind)
					}
				}
			}
		}
	}
}

// A due restart's reads are asked for one decision at a time, in the order of the
// gate table: the Deployment, then the firing alerts, then the consistent re-read.
// A restart the Deployment holds back asks for no other read. pass.decide in
// pkg/check takes one read per decision and relies on this order.
func TestReadsFollowTheGateOrder(t *testing.T) {
	cfg := testConfig()
	unread := func(at time.Time) decide.Observation {
		o := wedgedAt(at)
		o.Rollout, o.Consistent, o.HoldOnAlerts = nil, false, true
		return o
	}
	s, _ := decide.Decide(unread(t0), state.New(), cfg)
	start := t0.Add(5 * time.Minute)
	for d := time.Duration(0); d < cfg.ConfirmWindow; d += 15 * time.Second {
		s, _ = decide.Decide(inRun(start, unread(start.Add(d))), s, cfg)
	}
	due := inRun(start, unread(start.Add(cfg.ConfirmWindow)))
	read := map[string]func(o *decide.Observation){
		"Deployment":         func(o *decide.Observation) { o.Rollout = &decide.Rollout{Name: "agentenv-scheduler", Found: true} },
		"firing alerts":      func(o *decide.Observation) { o.Alerts = &decide.FiringAlerts{Matchers: `alertname="EtcdNoLeader"`} },
		"consistent re-read": func(o *decide.Observation) { o.Consistent = true },
	}
	o := due
	var asked []string
	for range 4 {
		_, r := decide.Decide(o, s, cfg)
		var need []string
		for name, asks := range map[string]bool{"Deployment": r.NeedRollout, "firing alerts": r.NeedAlerts, "consistent re-read": r.NeedConsistentRead} {
			if asks {
				need = append(need, name)
			}
		}
		if len(need) == 0 {
			if r.Action != state.ActionRestart {
				t.Fatalf("after reading %v: %s, want restart: %s", asked, r.Action, r.Reason)
			}
			break
		}
		if len(need) > 1 || slices.Contains(asked, need[0]) {
			t.Fatalf("after reading %v the decision asks for %v: want one read at a time, each once", asked, need)
		}
		asked = append(asked, need[0])
		read[need[0]](&o)
	}
	if want := []string{"Deployment", "firing alerts", "consistent re-read"}; !slices.Equal(asked, want) {
		t.Errorf("reads asked for %v, want %v", asked, want)
	}

	for name, d := range map[string]*decide.Rollout{
		"mid-rollout": {Name: "agentenv-scheduler", Found: true, InProgress: true, Detail: "1 of 2 updated"},
		"paused":      {Name: "agentenv-scheduler", Found: true, Annotations: pauseAnn(due.At.Add(time.Hour), "maintenance")},
	} {
		o := due
		o.Rollout = d
		if _, r := decide.Decide(o, s, cfg); r.Action != state.ActionBlocked || r.NeedAlerts || r.NeedConsistentRead {
			t.Errorf("Deployment %s: %s, alerts asked %t, consistent re-read asked %t: want blocked, nothing more read", name, r.Action, r.NeedAlerts, r.NeedConsistentRead)
		}
	}
}
