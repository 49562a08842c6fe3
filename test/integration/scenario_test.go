package integration

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentenv/watchdog/internal/testenv"
	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/cli"
	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/deliver"
	"github.com/agentenv/watchdog/pkg/state"
)

// The scenarios replay the scheduler's signatures (docs/design.md §1) on a clock compressed 30×: a */5
// CronJob fires every 10 s, the scheduler's 15 s refresh is 0.5 s, and every
// watchdog duration is scaled alike, so minutes of production time take seconds.
const speed = 30.0

func scaled(d time.Duration) string { return (time.Duration(float64(d) / speed)).String() }

// scaledFlags are the production defaults, compressed.
func scaledFlags() []string {
	return []string{
		"--startup-grace", scaled(cli.DefaultStartupGrace),
		"--wedged-for", scaled(cli.DefaultWedgedFor),
		"--confirm-window", scaled(cli.DefaultConfirmWindow),
		"--sample-interval", scaled(15 * time.Second),
		// A run keeps min(10 s, timeout/6) back for persisting, and as much again
		// before a restart for the reads it needs: compressed 30×, that sixth
		// (1 s) would stand for 30 s of production time instead of 10 s. 60 s
		// more restores production's margin, so that a run samples as long as it
		// does in production.
		"--timeout", scaled(cli.DefaultTimeout + 60*time.Second),
		"--scrape-timeout", "1s", "--api-timeout", "2s",
	}
}

// simScenario is a scenario whose metrics come from a Sim.
type simScenario struct {
	*scenario
	sim *testenv.Sim
	// worstPhase: runEpisode's cause comes readyLag before a pass, so that ready
	// still reads N when that pass looks and the wedge waits a whole interval
	// more to be seen (the worst case of the heal latency); otherwise right
	// after a pass.
	worstPhase bool
}

// readyLag is how long before a run the worst-phase cause comes on the compressed
// clock: ready reads 0 40-55 s after the nodes roll (the first gauge refresh 40 s
// after the roll), and a run looks a few seconds into its start (its real
// processing time times 30), so 37 s is the lag that is always still seen as N.
// It is up to 18 s short of the gauge's worst; virtualScenario.cronEpisode takes the worst.
const readyLag = 37 * time.Second

func newSimScenario(t testing.TB) *simScenario {
	t.Helper()
	s := newScenario(t, layout{serving: 3, page: ""})
	sim := testenv.NewSim(3, speed)
	s.metrics.SetHandler(sim.ServeHTTP)
	// Drop the fast test defaults of newScenario: the compressed production ones apply.
	s.base = append(s.base[:10:10], scaledFlags()...)
	return &simScenario{scenario: s, sim: sim}
}

// heal is what one scenario measured.
type heal struct {
	restarted  bool
	runs       int           // runs (CronJob mode) from the wedge until the restart
	sinceCause time.Duration // scheduler time from the phase change to the restart
	sinceSeen  time.Duration // scheduler time from the first run seeing the wedge to the restart
	evidence   string
	gate       string
	// seenRun and pagedRun are the first runs that ended wedged and that paged
	// wedged, firstSeen when the first began; log has a line per run.
	seenRun, pagedRun int
	firstSeen         time.Time
	log               []string
}

func (h heal) String() string {
	if !h.restarted {
		return "no restart"
	}
	if h.runs == 0 { // run mode: passes are not counted
		return fmt.Sprintf("restart after %s from the cause (%s evidence)", h.sinceCause.Round(time.Second), h.evidence)
	}
	return fmt.Sprintf("restart after %s from the cause, %s from first sight (%d runs, %s evidence: %s)",
		h.sinceCause.Round(time.Second), h.sinceSeen.Round(time.Second), h.runs, h.evidence, h.gate)
}

// cronEpisode runs `watchdog check` on a compressed */5 schedule, enters phase
// right after a run, and runs until a restart or maxRuns. (The heal-latency
// benchmark replays the CronJob on the virtual clock: virtualScenario.cronEpisode.)
func cronEpisode(t testing.TB, phase testenv.Phase, maxRuns int, configure func(*testenv.Sim)) heal {
	s := newSimScenario(t)
	if configure != nil {
		configure(s.sim)
	}
	return s.cronEpisode(t, phase, maxRuns)
}

// cronEpisode is cronEpisode on this scenario; each run gets args too.
func (s *simScenario) cronEpisode(t testing.TB, phase testenv.Phase, maxRuns int, args ...string) heal {
	interval := time.Duration(float64(5*time.Minute) / speed)
	// A healthy run first: it stores the counters the next run compares with.
	next := time.Now()
	s.check().expect(t, 0, "healthy", "none")
	next = next.Add(interval)
	cause := s.sim.Set(phase)

	var h heal
	for run := 1; run <= maxRuns; run++ {
		time.Sleep(time.Until(next))
		next = next.Add(interval)
		start := time.Now()
		if h.record(t, s.scenario, run, start, s.check(args...), cause, func(at time.Time) time.Duration { return s.sim.Scaled(time.Since(at)) }) {
			return h
		}
	}
	return h
}

// record books run of an episode, started at start, whose cause came at cause:
// first sight of the wedge, its first page, a line of the log; and, when the run
// restarted (true), what it took, in scheduler time (since).
func (h *heal) record(t testing.TB, s *scenario, run int, start time.Time, r result, cause time.Time, since func(time.Time) time.Duration) bool {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("run %d: exit %d\n%s", run, r.code, r.stderr)
	}
	if r.report.Verdict == state.VerdictWedged && h.firstSeen.IsZero() {
		h.firstSeen, h.seenRun = start, run
	}
	if h.pagedRun == 0 && slices.ContainsFunc(r.report.Alerts, func(d deliver.Delivery) bool { return d.Event == alert.EventWedged && d.OK }) {
		h.pagedRun = run
	}
	h.log = append(h.log, fmt.Sprintf("run %d: %s/%s, %d samples, %s", run, r.report.Verdict, r.report.Action, r.report.Samples, r.report.Reason))
	if r.report.Action != state.ActionRestart {
		return false
	}
	h.restarted, h.runs, h.sinceCause, h.sinceSeen = true, run, since(cause), since(h.firstSeen)
	h.evidence, h.gate = gateOf(r.report.Targets)
	if s.podExists(s.pod.Name) {
		t.Fatal("the report says restart but the pod still exists")
	}
	return true
}

func gateOf(targets []decide.Target) (string, string) {
	for _, tg := range targets {
		for _, g := range tg.Gates {
			if g.Name == "wedged-for" {
				return string(tg.Evidence), g.Detail
			}
		}
	}
	return "", ""
}

func TestCronStrongEvidenceRestartsWithinOneIntervalPlusConfirm(t *testing.T) {
	h := cronEpisode(t, testenv.DeadRolled, 4, nil)
	t.Logf("CronJob */5, discovery dead then nodes rolled (strong evidence): %s", h)
	if !h.restarted || h.evidence != "strong" || !strings.Contains(h.gate, "strong evidence held") {
		t.Fatalf("want a restart on confirmed strong evidence, got %s", h)
	}
	if h.runs != 1 {
		t.Errorf("strong evidence must heal on the first run that sees it, took %d runs", h.runs)
	}
}

// Weak evidence restarts through --wedged-for (2m30s), confirmed inside the run:
// the first run that sees the wedge samples on until both hold.
func TestCronWeakEvidenceWaitsForWedgedFor(t *testing.T) {
	h := cronEpisode(t, testenv.Unreachable, 4, nil)
	t.Logf("CronJob */5, nodes cannot reach the scheduler (weak evidence): %s", h)
	if !h.restarted || h.evidence != "weak" || !strings.Contains(h.gate, "throughout") || !strings.Contains(h.gate, "≥ "+scaled(cli.DefaultWedgedFor)) {
		t.Fatalf("want a restart through --wedged-for confirmed in the run, got %s", h)
	}
	if h.runs != 1 {
		t.Errorf("weak evidence restarts in the first run that sees the wedge, took %d runs", h.runs)
	}
}

func TestFlapHealingInsideConfirmWindowIsNotRestarted(t *testing.T) {
	s := newSimScenario(t)
	s.check().expect(t, 0, "healthy", "none")
	// The flap starts; wait until the gauges show ready 0 and rejections rose.
	cause := s.sim.Set(testenv.Flap)
	s.sim.HealAfter = time.Hour
	for s.sim.Values().Ready != 0 {
		time.Sleep(10 * time.Millisecond)
	}
	// It heals 40 s (scheduler time) into the confirm window that this run opens.
	s.sim.HealAfter = s.sim.Scaled(time.Since(cause)) + 40*time.Second
	r := s.check()
	r.expect(t, 0, "healthy", "none")
	if r.report.Samples < 2 {
		t.Errorf("the run should have sampled while confirming, took %d samples", r.report.Samples)
	}
	if !s.podExists(s.pod.Name) {
		t.Fatal("a self-healing flap was restarted")
	}
	st, _ := s.state()
	if len(st.Restarts) != 0 || len(st.Episodes) != 1 || st.Episodes[0].Outcome != "recovered" || st.Episodes[0].Evidence != "strong" {
		t.Fatalf("want the healed flap recorded as a recovered strong episode: restarts %+v episodes %+v", st.Restarts, st.Episodes)
	}
	t.Logf("flap healing 40 s into the confirm window: no restart, %d samples, episode %+v", r.report.Samples, st.Episodes[0])
}

// runEpisode starts `watchdog run` (compressed: --interval 1s is 30 s), enters
// phase, and measures until the pod is deleted or timeout.
func runEpisode(t testing.TB, phase testenv.Phase, timeout time.Duration) heal {
	return newSimScenario(t).runEpisode(t, phase, timeout)
}

// runEpisode is runEpisode on this scenario.
func (s *simScenario) runEpisode(t testing.TB, phase testenv.Phase, timeout time.Duration) heal {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var stderr lockedBuffer
	args := append([]string{"run"}, s.base...)
	args = removeFlag(args, "--output")
	args = append(args, "--interval", scaled(30*time.Second), "--metrics-addr", freeAddr(t))
	wg.Add(1)
	go func() {
		defer wg.Done()
		var stdout bytes.Buffer
		cli.ExecuteContext(ctx, args, &stdout, &stderr)
	}()
	defer func() { cancel(); wg.Wait() }()

	// Let a few healthy passes store counters, then break discovery.
	time.Sleep(3 * time.Second)
	if s.worstPhase {
		// Passes start every --interval: the cause comes readyLag before one.
		interval := s.sim.Real(30 * time.Second)
		last := s.lastPassStart(t)
		at := last.Add(interval - s.sim.Real(readyLag))
		for at.Before(time.Now()) {
			at = at.Add(interval)
		}
		time.Sleep(time.Until(at))
	}
	cause := s.sim.Set(phase)
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if !s.podExists(s.pod.Name) {
			h := heal{restarted: true, sinceCause: s.sim.Scaled(time.Since(cause))}
			st, _ := s.state()
			if r := restartFor(st, string(s.pod.UID)); r != nil {
				h.evidence, h.gate = string(r.Evidence), r.Reason
			}
			return h
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("watchdog run logs:\n%s", stderr.String())
	return heal{}
}

// lastPassStart waits for the next pass of `watchdog run` to be written and returns
// when it started.
func (s *simScenario) lastPassStart(t testing.TB) time.Time {
	st, _ := s.state()
	var before time.Time
	if st != nil && st.LastRun != nil {
		before = st.LastRun.At
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if st, _ := s.state(); st != nil && st.LastRun != nil && st.LastRun.At.After(before) {
			return st.LastRun.At
		}
	}
	t.Fatal("no pass of watchdog run was written in 10 s")
	return time.Time{}
}

func TestRunModeStrongEvidence(t *testing.T) {
	h := runEpisode(t, testenv.DeadRolled, 20*time.Second)
	t.Logf("watchdog run --interval 30s, discovery dead then nodes rolled: %s", h)
	if !h.restarted || h.evidence != "strong" {
		t.Fatalf("want a restart on strong evidence, got %s", h)
	}
}

func removeFlag(args []string, flag string) []string {
	out := args[:0:0]
	for i := 0; i < len(args); i++ {
		if args[i] == flag {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}

type lockedBuffer = testenv.SyncBuffer

// cronEpisode replays */5 runs of `watchdog check` with the production defaults
// on the virtual clock (no API delay but what the test injects): a healthy run,
// the cause, then a run every 5 minutes until a restart or maxRuns. Only the
// samples' cadence takes time, so the figures are the decision's own, exact,
// whatever the machine's load.
//
// Worst phase: the cause comes just under 55 s before a run, whose gauges refresh
// just after it looks: ready reads 0 at the first refresh at least 40 s after the
// roll, so that run still reads N, and the wedge is seen a whole interval later.
// Otherwise the cause comes right after a run.
func (v *virtualScenario) cronEpisode(t testing.TB, phase testenv.Phase, worst bool, maxRuns int) heal {
	t.Helper()
	v.check().expect(t, 0, "healthy", "none") // stores the counters
	const interval = 5 * time.Minute
	next := v.clk.Now().Truncate(time.Minute).Add(interval)
	cause := v.clk.Now().Add(time.Millisecond)
	if worst {
		// The refresh before the run is at next - 14.999 s: the cause must come
		// less than 40 s before it for the run to read N.
		cause = next.Add(-55*time.Second + 2*time.Millisecond)
		maxRuns++
	}
	v.clk.SetTime(cause)
	v.sim.Set(phase)

	var h heal
	for run := 1; run <= maxRuns; run++ {
		v.clk.SetTime(next)
		start := next
		next = next.Add(interval)
		if v.beforeRun != nil {
			v.beforeRun()
		}
		r := v.check()
		// A run that reads ready N while the new nodes' heartbeats are rejected
		// (a roll) samples on and may see the wedge itself; ready N is the
		// premise for the other causes.
		if worst && run == 1 && r.report.Verdict != state.VerdictHealthy && phase != testenv.DeadRolled {
			t.Fatalf("worst phase: the run %s after the cause should still read ready N, got %s: %s", start.Sub(cause), r.report.Verdict, r.report.Reason)
		}
		if h.record(t, v.scenario, run, start, r, cause, v.clk.Since) {
			return h
		}
	}
	t.Logf("no restart:\n%s", strings.Join(h.log, "\n"))
	return h
}

// BenchmarkHealLatency prints how long each kind of wedge takes to heal, from
// the cause (the nodes rolled, or stopped reaching the scheduler), in production
// time, in two phases: the worst (the cause comes just long enough before a run
// that ready still reads N when it looks, so the wedge is seen a whole interval
// later) and the cause right after a run. The CronJob runs on a virtual clock
// (virtualScenario.cronEpisode: exact, the gauges' refresh phase at its worst, 55 s);
// `watchdog run` on the 30x compressed clock, the cause readyLag (37 s) before a
// pass, with real processing time multiplied by 30 in its figures.
//
//	go test ./test/integration -run '^$' -bench HealLatency -benchtime 1x
func BenchmarkHealLatency(b *testing.B) {
	for i := 0; i < b.N; i++ {
		for _, worst := range []bool{true, false} {
			for _, c := range []struct {
				name  string
				phase string
				heal  func() heal
			}{
				{"CronJob */5, strong evidence (discovery dead, nodes rolled)", "cause 55 s before a run", func() heal { return newVirtualScenario(b).cronEpisode(b, testenv.DeadRolled, worst, 4) }},
				{"CronJob */5, weak evidence (nodes cannot reach the scheduler)", "cause 55 s before a run", func() heal { return newVirtualScenario(b).cronEpisode(b, testenv.Unreachable, worst, 4) }},
				{"run --interval 30s, strong evidence", fmt.Sprintf("cause %s before a pass", readyLag), func() heal {
					s := newSimScenario(b)
					s.worstPhase = worst
					return s.runEpisode(b, testenv.DeadRolled, 20*time.Second)
				}},
				{"run --interval 30s, weak evidence", fmt.Sprintf("cause %s before a pass", readyLag), func() heal {
					s := newSimScenario(b)
					s.worstPhase = worst
					return s.runEpisode(b, testenv.Unreachable, 30*time.Second)
				}},
			} {
				phase := "cause right after a run"
				if worst {
					phase = "worst phase, " + c.phase
				}
				fmt.Printf("%-42s %-64s %s\n", phase+":", c.name+":", c.heal())
			}
		}
	}
}

// restartFor is the latest restart record of pod uid in st, or nil.
func restartFor(st *state.State, uid string) *state.Restart {
	for i := len(st.Restarts) - 1; i >= 0; i-- {
		if st.Restarts[i].UID == uid {
			return &st.Restarts[i]
		}
	}
	return nil
}
