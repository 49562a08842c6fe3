package decide_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/watchdog/internal/podtest"
	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/state"
)

// pausedUntil is an observation of a wedged scheduler whose Deployment carries the
// pause annotations (nil: none).
func pausedObs(ann map[string]string) func(time.Time) decide.Observation {
	return func(at time.Time) decide.Observation {
		o := wedgedAt(at)
		o.Rollout.Annotations = ann
		o.Ownership = &decide.Ownership{Deployment: o.Rollout.Name, Found: true, Annotations: ann}
		return o
	}
}

func pauseAnn(until time.Time, reason string) map[string]string {
	return map[string]string{decide.PauseUntilAnnotation: until.UTC().Format(time.RFC3339), decide.PauseReasonAnnotation: reason}
}

func hasGate(r decide.Result, name string, ok bool) (decide.Gate, bool) {
	for _, t := range r.Targets {
		for _, g := range t.Gates {
			if g.Name == name && g.OK == ok {
				return g, true
			}
		}
	}
	return decide.Gate{}, false
}

// A pause holds every restart while it lasts: the watchdog still judges, records
// and pages (blocked, "paused: would restart"), and restarts as usual once the
// pause expires, with a warning that the annotation is stale. Three hours of */5
// runs of a scheduler wedged throughout, paused for the first 75 minutes.
func TestPauseHoldsRestartsUntilItExpires(t *testing.T) {
	cfg := testConfig()
	until := t0.Add(75 * time.Minute)
	wedged := pausedObs(pauseAnn(until, "etcd maintenance, CHG-1234"))
	restarted := false
	at := func(now time.Time) decide.Observation {
		o := wedged(now)
		if restarted { // the replacement is healthy
			p := schedPod("sched-b", "uid-b", podtest.Sample(3, 0))
			o.Pods = []decide.Pod{p}
		}
		return o
	}
	s := state.New()
	var restarts, blocked []time.Duration
	for i := 0; i < 36; i++ {
		start := t0.Add(time.Duration(i) * 5 * time.Minute)
		var r decide.Result
		s, r, _ = run(cfg, s, start, 170*time.Second, at)
		paused := start.Before(until)
		if paused != (r.Pause != nil) {
			t.Fatalf("run at +%s: pause %+v, want paused=%v", start.Sub(t0), r.Pause, paused)
		}
		switch r.Action {
		case state.ActionRestart:
			if paused {
				t.Fatalf("restart at +%s while paused: %s", start.Sub(t0), r.Reason)
			}
			restarts = append(restarts, start.Sub(t0))
			now := start.Add(2 * time.Minute)
			s.Restarts = append(s.Restarts, state.Restart{Pod: "sched-a", UID: "uid-a", Method: decide.MethodDelete, ClaimedAt: now, DoneAt: &now, Outcome: state.RestartDone})
			restarted = true
		case state.ActionBlocked:
			g, ok := hasGate(r, decide.GatePaused, false)
			if !ok {
				t.Fatalf("blocked at +%s by something other than the pause: %s", start.Sub(t0), r.Reason)
			}
			if !strings.HasPrefix(g.Detail, "paused: would restart") || !strings.Contains(g.Detail, "etcd maintenance, CHG-1234") || !strings.Contains(g.Detail, until.Format(time.RFC3339)) {
				t.Errorf("the pause gate must say it would restart, why and until when: %q", g.Detail)
			}
			if r.Targets[0].RestartInProgress() {
				t.Error("a paused restart must page (restart-blocked), not pass as in progress")
			}
			blocked = append(blocked, start.Sub(t0))
		}
		if !paused && !strings.Contains(strings.Join(r.Warnings, "\n"), "expired") {
			t.Errorf("run at +%s: an expired pause must be warned about: %q", start.Sub(t0), r.Warnings)
		}
	}
	if len(blocked) == 0 || blocked[0] > 10*time.Minute {
		t.Fatalf("the paused wedge must be blocked (paged) as soon as a restart is due: blocked at %v", blocked)
	}
	if len(restarts) == 0 || restarts[0] != 75*time.Minute {
		t.Fatalf("restarts at %v: want the first at +75m, the first run after the pause expired", restarts)
	}
	// Nothing of the pause is charged to the budget: the restart record is the only one.
	if n := len(s.Restarts); n != len(restarts) {
		t.Errorf("%d restart records for %d restarts", n, len(restarts))
	}
}

// An annotation that does not make a valid pause is ignored (the restart goes
// ahead) with a warning that says what is wrong with it.
func TestMalformedPauseIsIgnoredWithAWarning(t *testing.T) {
	cfg := testConfig()
	now := t0.Add(5 * time.Minute)
	for name, c := range map[string]struct {
		ann  map[string]string
		warn string
	}{
		"expired":                   {pauseAnn(t0, "maintenance"), "expired at"},
		"no expiry":                 {map[string]string{decide.PauseReasonAnnotation: "maintenance"}, "no " + decide.PauseUntilAnnotation},
		"no reason":                 {map[string]string{decide.PauseUntilAnnotation: now.Add(time.Hour).Format(time.RFC3339)}, "no " + decide.PauseReasonAnnotation},
		"not a time":                {map[string]string{decide.PauseUntilAnnotation: "tomorrow", decide.PauseReasonAnnotation: "maintenance"}, "not an RFC 3339 time"},
		"a duration":                {map[string]string{decide.PauseUntilAnnotation: "2h", decide.PauseReasonAnnotation: "maintenance"}, "not an RFC 3339 time"},
		"blank reason":              {pauseAnn(now.Add(time.Hour), "  "), "no " + decide.PauseReasonAnnotation},
		"reason too large":          {pauseAnn(now.Add(time.Hour), strings.Repeat("x", 2000)), "longer than"},
		"reason too large in bytes": {pauseAnn(now.Add(time.Hour), strings.Repeat("😀", 200)), "longer than 512 bytes"},
	} {
		t.Run(name, func(t *testing.T) {
			s, _ := decide.Decide(pausedObs(c.ann)(t0), state.New(), cfg)
			_, r := decideRun(cfg, s, now, pausedObs(c.ann))
			if r.Action != state.ActionRestart || r.Pause != nil {
				t.Fatalf("an invalid pause must be ignored: %s pause=%+v: %s", r.Action, r.Pause, r.Reason)
			}
			if w := strings.Join(r.Warnings, "\n"); !strings.Contains(w, c.warn) || !strings.Contains(w, "ignored") {
				t.Errorf("warnings %q lack %q", r.Warnings, c.warn)
			}
			if g, ok := hasGate(r, decide.GatePaused, true); !ok || !strings.Contains(g.Detail, "ignored") {
				t.Errorf("the pause gate must show the ignored annotation: %+v", r.Targets[0].Gates)
			}
		})
	}
	// No annotation: no gate, no warning.
	s, _ := decide.Decide(pausedObs(nil)(t0), state.New(), cfg)
	_, r := decideRun(cfg, s, now, pausedObs(nil))
	if _, ok := hasGate(r, decide.GatePaused, true); ok || len(r.Warnings) > 0 || r.Action != state.ActionRestart {
		t.Errorf("without a pause annotation: %s %q %+v", r.Action, r.Warnings, r.Targets[0].Gates)
	}
}

// The gate decides on the Deployment as read just before the restart: a pause set
// after the run's first (cached) read still holds the restart.
func TestPauseSetDuringTheRunHoldsTheRestart(t *testing.T) {
	cfg := testConfig()
	ann := pauseAnn(t0.Add(time.Hour), "investigating")
	at := func(now time.Time) decide.Observation {
		o := wedgedAt(now)
		o.Ownership = &decide.Ownership{Deployment: o.Rollout.Name, Found: true} // the cached read: not paused yet
		o.Rollout.Annotations = ann                                              // the read before the restart: paused
		return o
	}
	s, _ := decide.Decide(at(t0), state.New(), cfg)
	_, r := decideRun(cfg, s, t0.Add(5*time.Minute), at)
	if r.Action != state.ActionBlocked || r.Pause == nil {
		t.Fatalf("%s pause=%+v: %s", r.Action, r.Pause, r.Reason)
	}
}

// A pause annotation that makes no valid pause, or ends too far ahead, is told once
// (Result.PauseNotice: an Event and a warning alert), not on every run; one more
// than MaxPause ahead holds restarts until MaxPause after it was first seen, and
// says so.
func TestPauseNoticeOnceAndAFarPauseCapped(t *testing.T) {
	cfg := testConfig()
	now := t0.Add(5 * time.Minute)
	bad := pausedObs(map[string]string{decide.PauseUntilAnnotation: "tomorrow", decide.PauseReasonAnnotation: "maintenance"})
	s, r := decide.Decide(bad(now), state.New(), cfg)
	if !strings.Contains(r.PauseNotice, "not an RFC 3339 time") {
		t.Errorf("a malformed pause is not told: notice %q", r.PauseNotice)
	}
	s, r = decide.Decide(bad(now.Add(5*time.Minute)), s, cfg)
	if r.PauseNotice != "" || !strings.Contains(strings.Join(r.Warnings, "\n"), "not an RFC 3339 time") {
		t.Errorf("the same annotation: notice %q (want none: told once), warnings %q", r.PauseNotice, r.Warnings)
	}
	if _, r := decide.Decide(pausedObs(pauseAnn(t0, "maintenance"))(now), state.New(), cfg); r.PauseNotice != "" || len(r.Warnings) == 0 {
		t.Errorf("an expired pause ended as meant: notice %q (want none), warnings %q", r.PauseNotice, r.Warnings)
	}
	far := pausedObs(pauseAnn(now.Add(30*24*time.Hour), "forever"))
	s, r = decide.Decide(far(now), s, cfg)
	if r.Pause == nil || !r.Pause.Until.Equal(now.Add(decide.MaxPause)) || !strings.Contains(r.PauseNotice, "capped at") {
		t.Fatalf("a pause 30 days ahead: %+v, notice %q; want one capped at 7 days, told", r.Pause, r.PauseNotice)
	}
	s, r = decide.Decide(far(now.Add(24*time.Hour)), s, cfg)
	if r.Pause == nil || !r.Pause.Until.Equal(now.Add(decide.MaxPause)) || r.PauseNotice != "" {
		t.Errorf("a day later: %+v, notice %q; want the same cap, not told again", r.Pause, r.PauseNotice)
	}
	if _, r = decide.Decide(far(now.Add(decide.MaxPause+time.Minute)), s, cfg); r.Pause != nil || r.PauseNotice != "" {
		t.Errorf("past the cap: %+v, notice %q; want no pause, nothing told again", r.Pause, r.PauseNotice)
	}
}

// A far pause's cap starts when it was first seen, and stays there across runs
// that could not read the Deployment (a failed read, a failed sample): the cap
// ends 7 days after first seen and the notice (pause-invalid) is told once.
func TestFarPauseCapSurvivesFailedReads(t *testing.T) {
	cfg := testConfig()
	start := t0.Add(5 * time.Minute)
	far := pausedObs(pauseAnn(start.Add(30*24*time.Hour), "forever"))
	unread := func(at time.Time) decide.Observation {
		o := wedgedAt(at)
		o.Rollout, o.Ownership = nil, nil
		return o
	}
	s, told := state.New(), 0
	for at := start; at.Before(start.Add(decide.MaxPause + 12*time.Hour)); at = at.Add(12 * time.Hour) {
		var r decide.Result
		obs, read := far(at), false
		switch int(at.Sub(start)/(12*time.Hour)) % 4 {
		case 1:
			obs = unread(at)
		case 3:
			obs = decide.Unseen(far(at), at, errors.New("connection refused"))
		default:
			read = true
		}
		s, r = decide.Decide(obs, s, cfg)
		if r.PauseNotice != "" {
			told++
		}
		if !read {
			if r.Pause != nil { // an unread Deployment is not reported paused
				t.Errorf("at %s, Deployment unread: pause %+v", at.Sub(start), r.Pause)
			}
			continue
		}
		capped := at.Before(start.Add(decide.MaxPause))
		if capped != (r.Pause != nil) || (capped && !r.Pause.Until.Equal(start.Add(decide.MaxPause))) {
			t.Errorf("at %s: pause %+v; want capped at %s while before it", at.Sub(start), r.Pause, start.Add(decide.MaxPause))
		}
	}
	if told != 1 {
		t.Errorf("the far pause told %d times, want once", told)
	}
}
