package decide_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/watchdog/internal/schedsim"
	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/scrape"
	"github.com/agentenv/watchdog/pkg/state"
)

// simPod is one scheduler process as the simulated scheduler shows it at now.
type simPod struct {
	sim       *schedsim.Sim
	clock     time.Time
	name, uid string
	start     time.Time
}

func newSimPod(name, uid string, start time.Time) *simPod {
	p := &simPod{name: name, uid: uid, start: start, clock: start.Add(time.Hour)}
	p.sim = schedsim.NewSimOn(3, 1, func() time.Time { return p.clock })
	return p
}

// restarted is the replacement process of a restart at now: a new pod, started
// 10 s later, its discovery healthy.
func (p *simPod) restarted(n int, now time.Time) {
	p.name, p.uid, p.start, p.clock = fmt.Sprintf("sched-%d", n), fmt.Sprintf("uid-%d", n), now.Add(10*time.Second), now.Add(10*time.Second)
	p.sim.RestartProcess()
}

func (p *simPod) observe(t *testing.T, now time.Time) decide.Observation {
	p.clock = now
	sample, err := scrape.Extract(strings.NewReader(schedsim.Page(p.sim.Values())))
	if err != nil {
		t.Fatalf("the simulated page does not parse: %v", err)
	}
	pod := schedPod(p.name, p.uid, &sample)
	pod.StartedAt = p.start
	return observe(now, 3, pod)
}

// A restart whose replacement was observed healthy healed the
// scheduler. When a new flap kills the replacement's watch later (9 minutes after
// it started, inside the 15 minutes that judge a restart), that is a new problem:
// no restart-ineffective page, no back-off. Replayed as */5 runs over an hour
// with the production back-off settings, on the simulated scheduler.
func TestARestartThatHealedIsNotIneffective(t *testing.T) {
	cfg := testConfig()
	cfg.WedgedFor, cfg.ConfirmWindow = 150*time.Second, 90*time.Second
	cfg.IneffectiveWithin, cfg.BackoffBase, cfg.BackoffMax, cfg.BackoffReset = decide.DefaultIneffectiveWithin, decide.DefaultBackoffBase, decide.DefaultBackoffMax, decide.DefaultBackoffReset
	cfg.MaxRestarts, cfg.RestartWindow = 100, time.Hour

	p := newSimPod("sched-0", "uid-0", t0.Add(-time.Hour))
	p.clock = t0.Add(time.Minute)
	p.sim.Set(schedsim.DeadRolled) // discovery dies a minute after the first run
	at := func(now time.Time) decide.Observation { return p.observe(t, now) }

	s := state.New()
	var restarts []string
	for i := 0; i < 12; i++ {
		start := t0.Add(time.Duration(i) * 5 * time.Minute)
		var r decide.Result
		var samples int
		s, r, samples = run(cfg, s, start, 160*time.Second, at)
		for _, tg := range r.Targets {
			if tg.Ineffective != "" {
				t.Errorf("run at +%s: a restart that healed was called ineffective: %s", start.Sub(t0), tg.Ineffective)
			}
			if tg.Action == state.ActionBlocked {
				t.Errorf("run at +%s: blocked: %s", start.Sub(t0), decide.GateSummary(tg))
			}
		}
		if r.Action != state.ActionRestart {
			continue
		}
		// Carried out as pkg/check does: recorded done, a replacement starts; its
		// watch dies 9 minutes after it started (a new API-server flap).
		now := start.Add(time.Duration(samples-1) * decide.DefaultSampleInterval)
		s.Restarts = append(s.Restarts, state.Restart{Pod: p.name, UID: p.uid, Method: decide.MethodDelete, ClaimedAt: now, DoneAt: &now, Outcome: state.RestartDone})
		restarts = append(restarts, now.Sub(t0).String())
		p.restarted(len(restarts), now)
		p.clock = p.start.Add(9 * time.Minute)
		p.sim.Set(schedsim.DeadRolled)
	}
	if s.Backoff != nil {
		t.Errorf("a back-off after restarts that healed: %+v", s.Backoff)
	}
	if len(restarts) < 3 {
		t.Fatalf("restarts at %v, want each wedge restarted by the run that sees it", restarts)
	}
	for i, r := range s.Restarts[:len(s.Restarts)-1] {
		if r.Ineffective != "" || r.HealedAt == nil {
			t.Errorf("restart %d at +%s: ineffective %q, healed at %v; its replacement was observed healthy", i, r.ClaimedAt.Sub(t0), r.Ineffective, r.HealedAt)
		}
	}
	t.Logf("restarts at %v", restarts)
}
