package decide_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/watchdog/internal/podtest"
	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/state"
)

// Restarts are held while a matching alert fires, blocked (paged) with the alerts
// named; once the alerts clear, the restart is made. Alertmanager unreachable lets
// the restart through. Two hours of */5 runs of a scheduler wedged throughout,
// with etcd alerts firing for the first 40 minutes; the pass reads Alertmanager
// when the decision asks (NeedAlerts), as pkg/check does.
func TestRestartsHeldWhileAlertsFire(t *testing.T) {
	cfg := testConfig()
	clearAt := t0.Add(40 * time.Minute)
	read := func(now time.Time) *decide.FiringAlerts {
		a := &decide.FiringAlerts{Matchers: `alertname=~"etcd.*"`}
		if now.Before(clearAt) {
			a.Firing = []string{`etcdNoLeader{instance="etcd-0"}`}
		}
		return a
	}
	restarted := false
	at := func(now time.Time) decide.Observation {
		o := wedgedAt(now)
		if restarted {
			o = observe(now, 3, schedPod("sched-b", "uid-b", podtest.Sample(3, 0)))
		}
		o.HoldOnAlerts = true
		return o
	}
	decideReading := func(o decide.Observation, s *state.State) (*state.State, decide.Result) {
		next, r := decide.Decide(o, s, cfg)
		if r.NeedAlerts {
			if o.Alerts != nil {
				t.Fatal("asked to read the alerts twice")
			}
			o.Alerts = read(o.At)
			next, r = decide.Decide(o, s, cfg)
		}
		return next, r
	}
	s := state.New()
	var restarts, held []time.Duration
	for i := 0; i < 24; i++ {
		start := t0.Add(time.Duration(i) * 5 * time.Minute)
		var r decide.Result
		for d := time.Duration(0); d <= cfg.ConfirmWindow; d += decide.DefaultSampleInterval {
			s, r = decideReading(inRun(start, at(start.Add(d))), s)
		}
		decide.CountRun(s, r.Verdict)
		switch r.Action {
		case state.ActionRestart:
			if start.Before(clearAt) {
				t.Fatalf("restart at +%s while etcd alerts fire", start.Sub(t0))
			}
			restarts = append(restarts, start.Sub(t0))
			now := start.Add(2 * time.Minute)
			s.Restarts = append(s.Restarts, state.Restart{Pod: "sched-a", UID: "uid-a", Method: decide.MethodDelete, ClaimedAt: now, DoneAt: &now, Outcome: state.RestartDone})
			restarted = true
		case state.ActionBlocked:
			g, ok := hasGate(r, decide.GateAlerts, false)
			if !ok || !strings.Contains(g.Detail, `etcdNoLeader{instance="etcd-0"}`) || r.Targets[0].RestartInProgress() {
				t.Fatalf("blocked at +%s, want by the firing alerts, paged: %s", start.Sub(t0), r.Reason)
			}
			held = append(held, start.Sub(t0))
		}
	}
	if len(held) == 0 || held[0] > 10*time.Minute {
		t.Errorf("held at %v: want from the first due run", held)
	}
	if len(restarts) != 1 || restarts[0] != 40*time.Minute {
		t.Errorf("restarts at %v, want one at +40m, the first run after the alerts cleared", restarts)
	}

	// Alertmanager unreachable: the hold fails open, and says so.
	restarted = false
	s, _ = decide.Decide(at(t0), state.New(), cfg)
	o := inRun(t0.Add(5*time.Minute), at(t0.Add(5*time.Minute)))
	o.Alerts = &decide.FiringAlerts{Matchers: `alertname=~"etcd.*"`, Err: errors.New("alertmanager: dial tcp 127.0.0.1:9093: connection refused")}
	_, r := decideRun(cfg, s, t0.Add(5*time.Minute), func(now time.Time) decide.Observation { o.At = now; return o })
	if g, ok := hasGate(r, decide.GateAlerts, true); r.Action != state.ActionRestart || !ok || !strings.Contains(g.Detail, "fails open") {
		t.Errorf("Alertmanager unreachable: %s %+v", r.Action, r.Targets[0].Gates)
	}
	// Not configured: no gate, never a read.
	_, r = decideRun(cfg, s, t0.Add(5*time.Minute), wedgedAt)
	if _, ok := hasGate(r, decide.GateAlerts, true); ok || r.NeedAlerts || r.Action != state.ActionRestart {
		t.Errorf("without --hold-restarts-on-alert: %s need=%v", r.Action, r.NeedAlerts)
	}
}

// However many alerts fire (an Alertmanager answer of up to 4 MiB), the gate names
// a few and counts the rest: its detail goes into the reason, the report, the log
// and every alert.
func TestHeldByManyAlertsNamesAFew(t *testing.T) {
	cfg := testConfig()
	s, _ := decide.Decide(wedgedAt(t0), state.New(), cfg)
	o := inRun(t0.Add(5*time.Minute), wedgedAt(t0.Add(5*time.Minute)))
	o.HoldOnAlerts = true
	o.Alerts = &decide.FiringAlerts{Matchers: `alertname=~"etcd.*"`}
	for i := range 5000 {
		o.Alerts.Firing = append(o.Alerts.Firing, fmt.Sprintf(`etcdNoLeader{instance="etcd-%04d"}`, i))
	}
	o.Alerts.Firing[1] = `etcdNoLeader{instance="` + strings.Repeat("x", 1<<20) + `"}`
	_, r := decideRun(cfg, s, t0.Add(5*time.Minute), func(now time.Time) decide.Observation { o.At = now; return o })
	g, ok := hasGate(r, decide.GateAlerts, false)
	if !ok || r.Action != state.ActionBlocked || !strings.Contains(g.Detail, `etcdNoLeader{instance="etcd-0000"}`) ||
		!strings.Contains(g.Detail, "4995 more") || len(g.Detail) > 1500 {
		t.Errorf("%s, gate detail of %d bytes: want a few alerts named and the rest counted:\n%.2000s", r.Action, len(g.Detail), g.Detail)
	}
}
