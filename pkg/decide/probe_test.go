package decide_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/watchdog/internal/podtest"
	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/state"
)

// The discovery probe over hours of passes against a modelled scheduler whose
// discovery follows design.md §1's measurements: a live informer shows a new
// endpoint 0.3 s after its write; after an API-server outage it shows nothing
// until a relist, 17-85 s after the API server is back; a dead one never does.

// disco is the modelled scheduler and its surroundings.
type disco struct {
	nodes   []string // the serving nodes the API server lists
	diesAt  time.Time
	healsAt time.Time // zero: stays dead
	// outages of the API server: the informer shows nothing from an outage's
	// start until its relist, after it ends.
	outages []outage
	ready   int // the gauge; -1: every node
	// canaryErr and listErr fail the canary's write or ListNodes in pass n when they say so.
	canaryErr func(pass int) error
	listErr   func(pass int) error
	// extra nodes added (for the ListNodes comparison) at a time, unknown to a dead discovery.
	added   []string
	addedAt time.Time
	pod     string // the judged pod's UID: a new one is a new process (HA failover, restart)
}

type outage struct {
	from, to time.Time
	relist   time.Duration
}

// live reports the informer delivering changes at t.
func (d *disco) live(t time.Time) bool {
	if !d.diesAt.IsZero() && !t.Before(d.diesAt) && (d.healsAt.IsZero() || t.Before(d.healsAt)) {
		return false
	}
	for _, o := range d.outages {
		if !t.Before(o.from) && t.Before(o.to.Add(o.relist)) {
			return false
		}
	}
	return true
}

// apiDown reports the API server unreachable at t: the sample fails.
func (d *disco) apiDown(t time.Time) bool {
	return slices.ContainsFunc(d.outages, func(o outage) bool { return !t.Before(o.from) && t.Before(o.to) })
}

// shownBy reports whether something written at w shows in ListNodes at t: the
// informer delivered at some moment in [w+0.3s, t] (live moments come in spans;
// one-second steps are fine enough here).
func (d *disco) shownBy(w, t time.Time) bool {
	for s := w.Add(300 * time.Millisecond); !s.After(t); s = s.Add(time.Second) {
		if d.live(s) {
			return true
		}
	}
	return false
}

func (d *disco) serving(at time.Time) []string {
	if len(d.added) > 0 && !at.Before(d.addedAt) {
		return append(slices.Clone(d.nodes), d.added...)
	}
	return d.nodes
}

// sample is the pass's observation at, its canary written at w (zero: none).
func (d *disco) sample(pass int, start, at, w time.Time) decide.Observation {
	serving := d.serving(at)
	ready := d.ready
	if ready < 0 {
		ready = len(serving)
	}
	uid := cmpOr(d.pod, "uid-a")
	p := podtest.Pod("sched-a", started, podtest.UID(uid), podtest.Scraped(ready, 0))
	o := inRun(start, observe(at, len(serving), p))
	o.Expected.Nodes = serving
	o.Probing = true
	if d.apiDown(at) { // the whole sample failed
		return decide.Unseen(o, at, errors.New("the API server is unreachable"))
	}
	r := &decide.ProbeReading{At: at.Add(5 * time.Millisecond)}
	if d.listErr != nil && d.listErr(pass) != nil {
		r.Err = d.listErr(pass)
	} else {
		r.Nodes = slices.Clone(d.nodes)
		if len(d.added) > 0 && !at.Before(d.addedAt) && d.shownBy(d.addedAt, at) {
			r.Nodes = append(r.Nodes, d.added...)
		}
		if !w.IsZero() {
			r.Canary = &decide.CanaryReading{Name: fmt.Sprintf("probe-%d", pass), WrittenAt: w, Seen: d.shownBy(w, r.At)}
			if d.canaryErr != nil {
				r.Canary.Err = d.canaryErr(pass)
			}
		}
	}
	o.Pods[0].Probe = r
	return o
}

func cmpOr(s, or string) string {
	if s == "" {
		return or
	}
	return s
}

// probeCfg is the production defaults with the probe on.
func probeCfg() decide.Config {
	cfg := testConfig()
	cfg.WedgedFor, cfg.ProbeWindow = 150*time.Second, 3*time.Minute
	return cfg
}

// passBudget is what a */5 CronJob pass with --timeout 3m samples for: a sample
// starts while one more interval fits before the deadline less two 10 s reserves.
const passBudget = 160 * time.Second

// outcome is what a schedule of passes did.
type outcome struct {
	restartAt time.Time // the first restart, zero if none
	pages     []string  // times a bad verdict was first seen in a pass
	unreach   int       // passes that said nodes-unreachable
	last      decide.Result
	state     *state.State
}

// passes runs passes from..until: a pass starts every every (or right after the
// last, if that took longer), each writing a canary when canary is true, sampling
// as pkg/check does; it stops at the first restart.
func (d *disco) passes(cfg decide.Config, from, until time.Time, every time.Duration, canary bool) outcome {
	var out outcome
	s := state.New()
	next := from
	for pass := 0; next.Before(until); pass++ {
		start := next
		var w time.Time
		if canary {
			w = start // before the first sample's ListNodes
		}
		var r decide.Result
		bad := false
		now := start
		for ; ; now = now.Add(decide.DefaultSampleInterval) {
			s, r = decide.Decide(d.sample(pass, start, now, w), s, cfg)
			t := r.Targets[0]
			if t.Verdict == state.VerdictWedged && !t.NodesUnreachable && !bad {
				bad = true
				out.pages = append(out.pages, now.Sub(from).String())
			}
			if t.NodesUnreachable {
				out.unreach++
			}
			if r.Action == state.ActionRestart {
				out.restartAt, out.last, out.state = now, r, s
				return out
			}
			if t.Probe != "" && strings.Contains(t.Probe, "after it was written") {
				w = time.Time{} // retired once shown
			}
			if !t.SamplesOn(decide.DefaultSampleInterval, passBudget-now.Sub(start)) {
				break
			}
		}
		decide.CountRun(s, r.Verdict)
		out.last = r
		next = start.Add(every)
		if end := now.Add(time.Second); next.Before(end) {
			next = end
		}
	}
	out.state = s
	return out
}

func threeNodes() *disco { return &disco{nodes: []string{"node-a", "node-b", "node-c"}, ready: -1} }

// A discovery that dies while no node changes: ready 3, heartbeats accepted,
// nothing moves. Without the canary nothing catches it; with it, the second pass
// after the death restarts, however the death falls between passes.
func TestCanaryCatchesADeadDiscoveryWithNoNodeChange(t *testing.T) {
	cfg := probeCfg()
	for _, phase := range []time.Duration{0, time.Second, 90 * time.Second, 150 * time.Second, 161 * time.Second, 4*time.Minute + 59*time.Second} {
		d := threeNodes()
		d.diesAt = t0.Add(time.Hour + phase) // passes at t0 + k*5m
		if o := d.passes(cfg, t0, t0.Add(5*time.Hour), 5*time.Minute, false); !o.restartAt.IsZero() || len(o.pages) > 0 {
			t.Errorf("list mode restarted or paged a dead discovery with no node change (it cannot see it): %+v", o.pages)
		}
		o := d.passes(cfg, t0, t0.Add(5*time.Hour), 5*time.Minute, true)
		if o.restartAt.IsZero() {
			t.Fatalf("death at +%s: never restarted: %s", phase, o.last.Reason)
		}
		lastPass := d.diesAt.Truncate(5 * time.Minute)
		if took := o.restartAt.Sub(lastPass); took > 10*time.Minute+passBudget {
			t.Errorf("death at +%s: restarted %s after it, later than the second pass after the death", phase, o.restartAt.Sub(d.diesAt))
		}
		if !strings.Contains(o.last.Reason, "canaries were missing from the scheduler's node list") || o.last.Targets[0].Evidence != state.EvidenceStrong {
			t.Errorf("the restart's reason must name the canary as strong evidence: %s", o.last.Reason)
		}
	}
}

// Shadow mode and every gate see the probe's wedge as any other: here the budget.
func TestCanaryWedgePassesEveryGate(t *testing.T) {
	cfg := probeCfg()
	cfg.MaxRestarts = 0
	d := threeNodes()
	d.diesAt = t0.Add(time.Minute)
	o := d.passes(cfg, t0, t0.Add(time.Hour), 5*time.Minute, true)
	if !o.restartAt.IsZero() || o.last.Action != state.ActionBlocked || !strings.Contains(o.last.Reason, "budget 0/0") {
		t.Fatalf("a probe wedge must pass the budget like any: %s %s", o.last.Action, o.last.Reason)
	}
}

// A live discovery after API-server outages recovers within 85 s: neither a
// restart nor a page, whatever the relist delay and wherever the outage falls.
func TestAPIServerRestartsNeverRestartALiveDiscovery(t *testing.T) {
	cfg := probeCfg()
	for _, relist := range []time.Duration{17 * time.Second, 49 * time.Second, 60 * time.Second, 63 * time.Second, 85 * time.Second} {
		for phase := time.Duration(0); phase < 5*time.Minute; phase += 20 * time.Second {
			d := threeNodes()
			// An outage of 20 s every 7 minutes for hours: each meets a pass differently.
			for at := t0.Add(phase); at.Before(t0.Add(4 * time.Hour)); at = at.Add(7 * time.Minute) {
				d.outages = append(d.outages, outage{from: at, to: at.Add(20 * time.Second), relist: relist})
			}
			for _, every := range []time.Duration{5 * time.Minute, 30 * time.Second} {
				o := d.passes(cfg, t0, t0.Add(4*time.Hour), every, true)
				if !o.restartAt.IsZero() || len(o.pages) > 0 {
					t.Fatalf("relist %s, outages from +%s, passes every %s: restarted at %v, paged at %v: %s", relist, phase, every, o.restartAt, o.pages, o.last.Reason)
				}
			}
		}
	}
}

// An API server down 20 s every 100 s: the informer (85 s to relist) never
// catches up and a new process would fare no better. The samples that fail start
// the count over, so the canaries never add up to the window.
func TestAFlappingAPIServerStartsTheCountOver(t *testing.T) {
	cfg := probeCfg()
	d := threeNodes()
	for at := t0.Add(time.Hour); at.Before(t0.Add(4 * time.Hour)); at = at.Add(100 * time.Second) {
		d.outages = append(d.outages, outage{from: at, to: at.Add(20 * time.Second), relist: 85 * time.Second})
	}
	for _, every := range []time.Duration{5 * time.Minute, 30 * time.Second} {
		if o := d.passes(cfg, t0, t0.Add(4*time.Hour), every, true); !o.restartAt.IsZero() {
			t.Fatalf("passes every %s restarted during a flapping API server: %s", every, o.last.Reason)
		}
	}
}

// Permissions lost for a minute, then restored (the informer back 25 s later): a
// canary missing for less than the window proves nothing.
func TestShortDeathsAreNotCaught(t *testing.T) {
	cfg := probeCfg()
	for phase := time.Duration(0); phase < 5*time.Minute; phase += 10 * time.Second {
		d := threeNodes()
		d.diesAt, d.healsAt = t0.Add(time.Hour+phase), t0.Add(time.Hour+phase+85*time.Second)
		for _, every := range []time.Duration{5 * time.Minute, 30 * time.Second} {
			if o := d.passes(cfg, t0, t0.Add(3*time.Hour), every, true); !o.restartAt.IsZero() || len(o.pages) > 0 {
				t.Fatalf("dead for 85 s from +%s, passes every %s: restarted or paged: %v %s", phase, every, o.pages, o.last.Reason)
			}
		}
	}
}

// Fail safe: a canary that cannot be written (or is lost) and a ListNodes that
// fails (an HA standby's Unavailable, Unimplemented, a timeout) are unknown for the
// probe, never bad; a dead discovery is then not caught by it.
func TestProbeFailuresAreNeverBad(t *testing.T) {
	cfg := probeCfg()
	cases := map[string]func(d *disco){
		"every canary write fails": func(d *disco) { d.canaryErr = func(int) error { return errors.New("not written: forbidden") } },
		"ListNodes fails":          func(d *disco) { d.listErr = func(int) error { return errors.New("Unavailable: not the leader") } },
	}
	for name, fail := range cases {
		d := threeNodes()
		d.diesAt = t0.Add(time.Hour)
		fail(d)
		o := d.passes(cfg, t0, t0.Add(6*time.Hour), 5*time.Minute, true)
		if !o.restartAt.IsZero() || len(o.pages) > 0 {
			t.Errorf("%s: restarted or paged on a probe that could not see: %s", name, o.last.Reason)
		}
		if !strings.Contains(o.last.Targets[0].Probe, "proves nothing") && !strings.Contains(o.last.Targets[0].Probe, "unknown for the probe") {
			t.Errorf("%s: the report must say the probe could not tell: %q", name, o.last.Targets[0].Probe)
		}
	}
	// Every other canary lost: the count starts over each time, so no verdict.
	d := threeNodes()
	d.diesAt = t0.Add(time.Hour)
	d.canaryErr = func(pass int) error {
		if pass%2 == 1 {
			return errors.New("deleted by someone else")
		}
		return nil
	}
	if o := d.passes(cfg, t0, t0.Add(6*time.Hour), 5*time.Minute, true); !o.restartAt.IsZero() {
		t.Errorf("canaries lost every other pass must not add up: %s", o.last.Reason)
	}
}

// HA failover: the new leader is a new process, its count starts at zero.
func TestFailoverStartsTheCountOver(t *testing.T) {
	cfg := probeCfg()
	d := threeNodes()
	d.diesAt = t0.Add(time.Minute)
	o := d.passes(cfg, t0, t0.Add(5*time.Minute+time.Second), 5*time.Minute, true) // two passes: 2m29s unseen
	if got := o.state.Pods["uid-a"].Probe.Unseen.D(); got < 2*time.Minute {
		t.Fatalf("the first passes counted %s of the canary unseen", got)
	}
	d.pod = "uid-b"
	s, r := decide.Decide(d.sample(9, t0.Add(10*time.Minute), t0.Add(10*time.Minute+30*time.Second), t0.Add(10*time.Minute)), o.state, cfg)
	if r.Verdict != state.VerdictHealthy || s.Pods["uid-b"].Probe.Unseen.D() > 31*time.Second {
		t.Fatalf("a new process inherited the old one's count: %s, %s", r.Reason, s.Pods["uid-b"].Probe.Unseen.D())
	}
}

// The ListNodes comparison: nodes added while discovery is dead stay unknown to
// the scheduler; listed for the window, they are strong evidence, named.
func TestNodesUnknownToTheSchedulerForTheWindow(t *testing.T) {
	cfg := probeCfg()
	d := threeNodes()
	d.diesAt, d.added, d.addedAt = t0.Add(time.Hour), []string{"node-d", "node-e"}, t0.Add(time.Hour+time.Minute)
	d.ready = 3 // the new nodes' heartbeats are never counted, and in this model never rejected
	o := d.passes(cfg, t0, t0.Add(3*time.Hour), 5*time.Minute, false)
	if o.restartAt.IsZero() || !strings.Contains(o.last.Reason, "2 node(s) listed for") || !strings.Contains(o.last.Reason, "node-d, node-e") {
		t.Fatalf("unknown nodes must become strong evidence after the window: %v %s", o.restartAt, o.last.Reason)
	}
	if o.restartAt.Before(d.addedAt.Add(cfg.ProbeWindow)) {
		t.Errorf("restarted %s after the nodes were listed, before the window", o.restartAt.Sub(d.addedAt))
	}
	// A live discovery learns them in 0.3 s: nothing.
	d.diesAt = time.Time{}
	if o := d.passes(cfg, t0, t0.Add(3*time.Hour), 5*time.Minute, false); !o.restartAt.IsZero() || len(o.pages) > 0 {
		t.Errorf("a live discovery was judged by nodes it knows: %s", o.last.Reason)
	}
}

// Discovery that never synced: ListNodes empty while nodes are listed.
func TestNeverSyncedDiscovery(t *testing.T) {
	cfg := probeCfg()
	s := state.New()
	var r decide.Result
	for at := t0; at.Before(t0.Add(4 * time.Minute)); at = at.Add(time.Minute) {
		o := observe(at, 3, podtest.Pod("sched-a", started, podtest.UID("uid-a"), podtest.Scraped(3, 0)))
		o.Expected.Nodes, o.Probing = []string{"node-a", "node-b", "node-c"}, true
		o.Pods[0].Probe = &decide.ProbeReading{At: at}
		s, r = decide.Decide(o, s, cfg)
	}
	if r.Verdict != state.VerdictWedged || !strings.Contains(r.Reason, "3 node(s) listed for 3m are unknown to the scheduler: node-a, node-b, node-c") {
		t.Fatalf("got %s: %s", r.Verdict, r.Reason)
	}
}

// Ready 0 while ListNodes names every serving node and nothing is rejected: the
// nodes cannot reach a scheduler whose discovery works. Its own alert, hours of
// it, and never a restart; without a ListNodes answer today's weak path stands.
func TestNodesThatCannotReachALiveSchedulerAreNeverRestarted(t *testing.T) {
	cfg := probeCfg()
	d := threeNodes()
	d.ready = 0
	o := d.passes(cfg, t0, t0.Add(6*time.Hour), 5*time.Minute, true)
	if !o.restartAt.IsZero() || o.unreach == 0 || len(o.pages) > 0 {
		t.Fatalf("restarted at %v, %d nodes-unreachable passes: %s", o.restartAt, o.unreach, o.last.Reason)
	}
	tg := o.last.Targets[0]
	if tg.Verdict != state.VerdictWedged || tg.Action != state.ActionNone || !strings.Contains(tg.Reason, "the scheduler knows all 3 but none reports: the nodes cannot reach it") {
		t.Errorf("got %s/%s: %s", tg.Verdict, tg.Action, tg.Reason)
	}
	d.listErr = func(int) error { return errors.New("Unimplemented") }
	if o := d.passes(cfg, t0, t0.Add(time.Hour), 5*time.Minute, true); o.restartAt.IsZero() {
		t.Errorf("without ListNodes the weak wedge must take today's path (a restart after --wedged-for): %s", o.last.Reason)
	}
}

// A canary seen by a process that started after it proves its first list, not its
// watch: it resets nothing. Seen by the process before: the count starts over.
func TestCanaryOlderThanTheProcess(t *testing.T) {
	cfg := probeCfg()
	s := state.New()
	p := podtest.Pod("sched-a", t0, podtest.UID("uid-a"), podtest.Scraped(3, 0))
	o := observe(t0.Add(3*time.Minute), 3, p)
	o.Expected.Nodes, o.Probing = []string{"n"}, true
	o.Pods[0].Probe = &decide.ProbeReading{At: o.At, Nodes: []string{"n", "c"}, Canary: &decide.CanaryReading{Name: "c", WrittenAt: t0.Add(-time.Second), Seen: true}}
	_, r := decide.Decide(o, s, cfg)
	if !strings.Contains(r.Targets[0].Probe, "proof of its first list, not of its watch") {
		t.Errorf("got %q", r.Targets[0].Probe)
	}
}

// BenchmarkProbeHealLatency prints, for a discovery that dies while no node
// changes, the time from the death to the restart, best and worst over where the
// death falls between passes: a */5 CronJob and `watchdog run` every 30 s, canary
// mode (list mode never restarts it). Production defaults; the model's informer.
func BenchmarkProbeHealLatency(b *testing.B) {
	cfg := probeCfg()
	for _, every := range []time.Duration{5 * time.Minute, 30 * time.Second} {
		b.Run("every "+every.String(), func(b *testing.B) {
			var best, worst time.Duration
			for b.Loop() {
				best, worst = time.Duration(1<<62), 0
				for phase := time.Duration(0); phase < every; phase += every / 60 {
					d := threeNodes()
					d.diesAt = t0.Add(time.Hour + phase)
					o := d.passes(cfg, t0, t0.Add(5*time.Hour), every, true)
					if o.restartAt.IsZero() {
						b.Fatalf("death at +%s: never restarted", phase)
					}
					took := o.restartAt.Sub(d.diesAt)
					best, worst = min(best, took), max(worst, took)
				}
			}
			b.Logf("passes every %s: death to restart %s best, %s worst", every, best, worst)
		})
	}
}
