package check_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/watchdog/internal/schedsim"
	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/scrape"
	"github.com/agentenv/watchdog/pkg/state"
)

// Samples fail, most often when the API server is in trouble, which is when
// discovery dies. A failed sample neither ends the run nor
// counts as healthy; a run that saw the wedge pages it even if a later sample
// failed.

// scrapeTimeout is a sample whose scrape timed out.
var scrapeTimeout = &scrape.Error{Kind: scrape.KindTimeout, Err: errors.New("context deadline exceeded")}

// A strong wedge whose 4th sample times out is still restarted by the run that
// first sees it, and paged: the rejected-heartbeat counter rose across the gap.
func TestAFailedSampleDoesNotEndTheRun(t *testing.T) {
	h := newHarness(t)
	h.productionDefaults()
	n := 0
	h.obs.see = func(kind string, now time.Time) (decide.Observation, error) {
		obs, _ := wedgedStrong(kind, now)
		if n++; n == 4 {
			obs.Pods[0].Sample, obs.Pods[0].ScrapeErr = nil, scrapeTimeout
		}
		return obs, nil
	}
	rep, err := h.pass()
	if err != nil {
		t.Fatal(err)
	}
	if rep.Action != state.ActionRestart || h.restarts() != 1 {
		t.Fatalf("%s/%s after %d samples: %s", rep.Verdict, rep.Action, rep.Samples, rep.Reason)
	}
	if got := h.sink.events(); !slices.Contains(got, alert.EventWedged) {
		t.Errorf("sent %v: the wedge this run confirmed was not paged", got)
	}

	// The same wedge, every sample after the 4th failing: the run cannot
	// restart, but it saw the wedge, so it pages it and hands the episode over.
	h = newHarness(t)
	h.productionDefaults()
	n = 0
	h.obs.see = func(kind string, now time.Time) (decide.Observation, error) {
		obs, _ := wedgedStrong(kind, now)
		if n++; n >= 4 {
			obs.Pods[0].Sample, obs.Pods[0].ScrapeErr = nil, scrapeTimeout
		}
		return obs, nil
	}
	rep, err = h.pass()
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != state.VerdictWedged || rep.Action != state.ActionWait || h.restarts() != 0 {
		t.Fatalf("%s/%s, %d restarts: %s", rep.Verdict, rep.Action, h.restarts(), rep.Reason)
	}
	if got := h.sink.events(); !slices.Contains(got, alert.EventWedged) {
		t.Errorf("sent %v: a run that saw the wedge must page it even though its last samples failed", got)
	}
	if rep.Samples < 8 {
		t.Errorf("%d samples: the failed samples ended the run early", rep.Samples)
	}
}

// A pod list that fails in the middle of a confirmation is a failed sample too.
func TestAFailedListDoesNotEndTheRun(t *testing.T) {
	h := newHarness(t)
	h.productionDefaults()
	n := 0
	h.obs.see = func(kind string, now time.Time) (decide.Observation, error) {
		if n++; n == 3 {
			return decide.Observation{}, errors.New("the server was unable to return a response in the time allotted")
		}
		return wedgedStrong(kind, now)
	}
	rep, err := h.pass()
	if err != nil {
		t.Fatal(err)
	}
	if rep.Action != state.ActionRestart || h.restarts() != 1 {
		t.Fatalf("%s/%s after %d samples: %s (warnings %q)", rep.Verdict, rep.Action, rep.Samples, rep.Reason, rep.Warnings)
	}
	if !contains(rep.Warnings, "a sample failed") {
		t.Errorf("warnings %q: the failed sample is not reported", rep.Warnings)
	}
}

// The reads a restart needs (the Deployment, the pods and EndpointSlices again
// with a consistent read) are samples too, and fail when the API server is in
// trouble. A failed one is read again at the next sample while a restart still
// fits before the deadline: a strong wedge whose reads fail once or twice in a row
// is restarted by the run that confirmed it, with observations of 0-5 s, and nobody
// is paged restart-blocked. When no retry fits (every read fails), the run ends
// blocked by its deadline and says why.
func TestAFailedReadBeforeTheRestartIsRetried(t *testing.T) {
	for _, read := range []string{"consistent", "rollout"} {
		for took := time.Duration(0); took <= 5*time.Second; took += 2500 * time.Millisecond {
			for _, fails := range []int{1, 2, 1000} {
				t.Run(fmt.Sprintf("%s/%s/%d failed", read, took, fails), func(t *testing.T) {
					h := newHarness(t)
					h.productionDefaults()
					h.slowAPI(took)
					n := 0
					failing := func() error {
						if n++; n <= fails {
							return errors.New("etcdserver: request timed out")
						}
						return nil
					}
					h.obs.see = func(kind string, now time.Time) (decide.Observation, error) {
						if kind == read {
							if err := failing(); err != nil {
								return decide.Observation{}, err
							}
						}
						return wedgedStrong(kind, now)
					}
					if read == "rollout" {
						h.obs.rolloutErr = failing
					}
					rep, _ := h.pass()
					ran := h.clk.Since(t0)
					if ran > h.timeout || !rep.StateWritten {
						t.Errorf("the pass ran %s (deadline %s), state written %t", ran, h.timeout, rep.StateWritten)
					}
					sent := h.sink.events()
					if fails == 1000 {
						if h.restarts() != 0 || rep.Action != state.ActionBlocked || !slices.Contains(sent, alert.EventRestartBlocked) {
							t.Errorf("every %s read failing: %s/%s, %d restarts, sent %v; want blocked, and restart-blocked paged", read, rep.Verdict, rep.Action, h.restarts(), sent)
						}
						return
					}
					if rep.Action != state.ActionRestart || h.restarts() != 1 || slices.Contains(sent, alert.EventRestartBlocked) {
						t.Fatalf("%d failed %s read(s): %s/%s after %d samples, %s in, %d restarts, sent %v: %s", fails, read, rep.Verdict, rep.Action, rep.Samples, ran, h.restarts(), sent, rep.Reason)
					}
					if !contains(rep.Warnings, "etcdserver: request timed out") {
						t.Errorf("warnings %q: the failed read is not reported", rep.Warnings)
					}
					t.Logf("%d failed %s read(s), observations of %s: restarted %s into the run, after %d samples", fails, read, took, ran, rep.Samples)
				})
			}
		}
	}
}

// healOutcome is what one replay of a wedge measured.
type healOutcome struct {
	seenRun      int           // the first run with a sample that saw ready 0 (0: none)
	pagedRun     int           // the first run that paged wedged
	restartRun   int           // the run that restarted
	sinceCause   time.Duration // from the cause to the restart
	failedShares float64       // share of samples that failed
	log          []string
}

// replayWedge replays */5 runs of `watchdog check` (production defaults, fake
// clock) against a simulated scheduler that enters phase at cause, after the first
// run (schedsim.DeadRolled: discovery dead, nodes rolled, every heartbeat
// rejected; schedsim.Unreachable: no node reaches it, no counter moves), each
// sample's scrape failing with probability rate, until a restart or 2 hours. Each
// observation takes took (every other API call half as long); every run must end
// by its deadline.
func replayWedge(t *testing.T, phase schedsim.Phase, rate float64, seed uint64, took time.Duration) healOutcome {
	return replay(t, replayCase{phase: phase, rate: rate, seed: seed, took: took, runs: 24})
}

// replayCase is one replay of replay: the phase the scheduler enters at the
// cause, after run 0 (at the seeded random offset into the next interval when
// offset is nil), back to healthy blip after the cause when blip is set; the
// scrapes failing with probability rate (seeded) from the cause on; runs */5
// runs after run 0 at most.
type replayCase struct {
	phase  schedsim.Phase
	rate   float64
	seed   uint64
	took   time.Duration
	offset *time.Duration
	blip   time.Duration
	runs   int
}

func replay(t *testing.T, c replayCase) healOutcome {
	h := newHarness(t)
	h.productionDefaults()
	h.slowAPI(c.took)
	rng := rand.New(rand.NewPCG(c.seed, 0x17))
	sim := schedsim.NewSimOn(3, 1, h.clk.Now)
	var out healOutcome
	var samples, failed, run int
	failing := false // from the cause on
	cause, healed := time.Time{}, false
	h.obs.see = func(string, time.Time) (decide.Observation, error) {
		samples++
		if c.blip > 0 && failing && !healed && !h.clk.Now().Before(cause.Add(c.blip)) {
			// The phase's end, dated when it came (the sim counts from Set).
			now := h.clk.Now()
			h.clk.SetTime(cause.Add(c.blip))
			sim.Set(schedsim.Healthy)
			h.clk.SetTime(now)
			healed = true
		}
		pod := schedPod(0, 0)
		if failing && rng.Float64() < c.rate {
			failed++
			pod.Sample, pod.ScrapeErr = nil, scrapeTimeout
			return observation(3, pod), nil
		}
		sample, err := scrape.Extract(strings.NewReader(schedsim.Page(sim.Values())))
		if err != nil {
			t.Fatalf("the simulated page does not parse: %v", err)
		}
		pod.Sample = &sample
		if out.seenRun == 0 && sample.Ready() == 0 {
			out.seenRun = run
		}
		return observation(3, pod), nil
	}

	for run = 0; run <= c.runs; run++ {
		h.clk.SetTime(t0.Add(time.Duration(run) * 5 * time.Minute))
		sent := len(h.sink.events())
		start := h.clk.Now()
		rep, err := h.pass()
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		if ran := h.clk.Since(start); ran > h.timeout {
			// In a cluster the deadline would have cut the restart or its record
			// short, and paged watchdog-error.
			t.Errorf("phase %d, failure rate %.0f%%, seed %d, observations of %s: run %d ran %s, past its %s deadline (%s/%s after %d samples)",
				c.phase, c.rate*100, c.seed, c.took, run, ran, h.timeout, rep.Verdict, rep.Action, rep.Samples)
		}
		if run == 0 {
			// The cause lands somewhere in the next interval (seeded), after this
			// run, which saw the scheduler healthy.
			if rep.Verdict != state.VerdictHealthy {
				t.Fatalf("run 0 before the cause: %s", rep.Verdict)
			}
			offset := time.Second + time.Duration(rng.Int64N(int64(5*time.Minute-time.Second)))
			if c.offset != nil {
				offset = *c.offset
			}
			cause = t0.Add(offset)
			h.clk.SetTime(cause)
			sim.Set(c.phase)
			failing = true
			continue
		}
		out.log = append(out.log, fmt.Sprintf("run %d at +%s: %s/%s, %d samples, %s", run, h.clk.Now().Sub(cause).Round(time.Second), rep.Verdict, rep.Action, rep.Samples, rep.Reason))
		if out.pagedRun == 0 && slices.Contains(h.sink.events()[sent:], alert.EventWedged) {
			out.pagedRun = run
		}
		if h.restarts() > 0 {
			out.restartRun, out.sinceCause = run, h.clk.Now().Sub(cause)
			break
		}
	}
	out.failedShares = float64(failed) / float64(max(samples, 1))
	return out
}

// Scrape failures at 0-30 %, seeded, each rate replayed from 40 causes at
// different phases of the schedule. Up to 30 %, every wedge is paged in the first
// run that sees it and restarted within two runs of it, at most 13 minutes after
// the cause: a strong wedge (discovery dead) across a failed sample because the
// rejected counter rose on both sides, a weak one (nodes unreachable) because
// neither heartbeat counter moved since the episode's first sample. The figures
// are printed (docs/performance.md). Before the bridge of a weak wedge, one
// failed sample started its confirmation over: at 20 %, restarted by run 15 at
// worst, 1h14m after the cause; at 30 %, one of 40 not in 2 hours.
func TestScrapeFailuresSweep(t *testing.T) {
	const seeds = 40
	for _, phase := range []struct {
		name  string
		phase schedsim.Phase
		runs  int // restarted within this many runs of the first that saw it
	}{{"strong (discovery dead)", schedsim.DeadRolled, 2}, {"weak (nodes unreachable)", schedsim.Unreachable, 2}} {
		for _, rate := range []float64{0, 0.05, 0.10, 0.15, 0.20, 0.25, 0.30} {
			var runsAfter []int
			var heal []time.Duration
			lastPaged, unhealed := 0, 0
			for seed := uint64(1); seed <= seeds; seed++ {
				o := replayWedge(t, phase.phase, rate, seed, 0)
				if o.restartRun == 0 || o.seenRun == 0 {
					t.Errorf("%s, failure rate %.0f%%, seed %d: no restart in 2 hours (first seen in run %d):\n%s", phase.name, rate*100, seed, o.seenRun, strings.Join(o.log, "\n"))
					unhealed++
					continue
				}
				after := o.restartRun - o.seenRun + 1
				runsAfter, heal = append(runsAfter, after), append(heal, o.sinceCause)
				lastPaged = max(lastPaged, o.pagedRun-o.seenRun+1)
				if o.pagedRun != o.seenRun || after > phase.runs || o.sinceCause > 13*time.Minute {
					t.Errorf("%s, failure rate %.0f%%, seed %d: first seen in run %d, paged in run %d, restarted in run %d (%s after the cause); want paged in the run that saw it, restarted within %d runs, 13m of the cause:\n%s",
						phase.name, rate*100, seed, o.seenRun, o.pagedRun, o.restartRun, o.sinceCause.Round(time.Second), phase.runs, strings.Join(o.log, "\n"))
				}
			}
			if len(heal) == 0 {
				continue
			}
			slices.Sort(runsAfter)
			slices.Sort(heal)
			t.Logf("%-24s scrape failures %3.0f%%: restarted by run %d (median) / %d (worst) counted from the first that saw it; paged by run %d at worst; cause to restart %s median, %s worst; %d of %d not restarted in 2 h",
				phase.name, rate*100, runsAfter[len(runsAfter)/2], runsAfter[len(runsAfter)-1], lastPaged, heal[len(heal)/2].Round(time.Second), heal[len(heal)-1].Round(time.Second), unhealed, seeds)
		}
	}
}

// The same replays on a slow API server: every observation takes 0-5 s (every
// other API call half as long) while 0-30 % of the scrapes fail. Every run ends by
// its deadline, whatever it was doing when time ran short: a failed sample leaves
// the pass sampling on, and the next sample is a whole interval away; and a strong
// wedge is still paged by the first run that sees it and restarted within two
// runs up to 20 %.
func TestFailedSamplesOnASlowAPIEndByTheDeadline(t *testing.T) {
	const seeds = 40
	for took := time.Duration(0); took <= 5*time.Second; took += time.Second {
		for _, rate := range []float64{0, 0.10, 0.20, 0.30} {
			worst := 0
			for seed := uint64(1); seed <= seeds; seed++ {
				o := replayWedge(t, schedsim.DeadRolled, rate, seed, took)
				if o.restartRun == 0 || o.seenRun == 0 {
					t.Errorf("observations of %s, failure rate %.0f%%, seed %d: no restart in 2 hours:\n%s", took, rate*100, seed, strings.Join(o.log, "\n"))
					continue
				}
				after := o.restartRun - o.seenRun + 1
				worst = max(worst, after)
				if o.pagedRun != o.seenRun || (rate <= 0.20 && after > 2) {
					t.Errorf("observations of %s, failure rate %.0f%%, seed %d: first seen in run %d, paged in run %d, restarted in run %d:\n%s",
						took, rate*100, seed, o.seenRun, o.pagedRun, o.restartRun, strings.Join(o.log, "\n"))
				}
			}
			t.Logf("strong wedge, observations of %s, scrape failures %3.0f%%: restarted by run %d at worst, counted from the first that saw it", took, rate*100, worst)
		}
	}
}

// The bridge over failed samples adds no restart: a blip of nodes that cannot
// reach the scheduler (weak evidence, no counter moves) that heals by itself is
// restarted with failed samples only where the same replay without failed
// samples restarts it, and no earlier than there, swept over blip lengths,
// the blip's phase in the */5 schedule (every 20 s of the interval) and failure
// rates (3 seeds each). The replays without failures decide what a blip of each
// length costs; the figures are printed.
func TestFailedSamplesBridgeAddsNoRestart(t *testing.T) {
	blips := []time.Duration{30 * time.Second, time.Minute, 90 * time.Second, 2 * time.Minute, 150 * time.Second, 3 * time.Minute,
		210 * time.Second, 4 * time.Minute, 5 * time.Minute, 6 * time.Minute, 8 * time.Minute}
	for _, blip := range blips {
		clean, failing, added, replays := 0, 0, 0, 0
		for offset := time.Second; offset < 5*time.Minute; offset += 20 * time.Second {
			c := replayCase{phase: schedsim.Unreachable, offset: &offset, blip: blip, runs: 6}
			b := replay(t, c)
			base := b.restartRun > 0
			if base {
				clean++
			}
			for _, rate := range []float64{0.1, 0.2, 0.3} {
				for seed := uint64(1); seed <= 3; seed++ {
					c.rate, c.seed = rate, seed
					o := replay(t, c)
					replays++
					if o.restartRun > 0 {
						failing++
						if !base || o.sinceCause < b.sinceCause {
							added++
							t.Errorf("a %s blip %s after a run, %.0f%% failed, seed %d: restarted %s after the cause, where the replay without failures restarts %s after it (0s: never):\n%s",
								blip, offset, rate*100, seed, o.sinceCause, b.sinceCause, strings.Join(o.log, "\n"))
						}
					}
				}
			}
		}
		t.Logf("blip of %-6s: restarted in %2d of 15 phases without failed samples; with 10-30 %% failed, %3d of %d replays restarted, %d where or earlier than the replay without failures was not",
			blip, clean, failing, replays, added)
	}
}
