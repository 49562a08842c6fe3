package decide

import (
	"fmt"
	"time"

	"k8s.io/utils/ptr"

	"github.com/agentenv/watchdog/pkg/state"
)

// track moves the pod's record on by t's verdict. It reports a gap: a failed sample
// inside this run's streak, which the next settles (advanceWedgeClock).
func (p *judgedPod) track(failed bool, t *Target) (gap bool) {
	s, ps, now := p.state, p.rec, p.now
	if p.Sample != nil && p.ScrapeErr == nil && t.Verdict != state.VerdictUnknown {
		t.Ready, t.Expected = new(p.Sample.Ready()), new(p.obs.Expected.Serving)
		ageCounters(ps, now)
		ps.Counters = &state.Counters{HeartbeatOK: p.Sample.HeartbeatOK, HeartbeatRejected: p.Sample.HeartbeatRejected, At: now}
	} else if p.obs.ExpectedErr == nil {
		t.Expected = new(p.obs.Expected.Serving)
	}
	if t.Verdict != state.VerdictHealthy && s.Backoff != nil {
		// Only an unbroken BackoffReset of healthy observations ends the back-off.
		s.Backoff.HealthySince = nil
	}
	switch t.Verdict {
	case state.VerdictUnknown:
		ps.ConsecutiveUnknowns++
		switch {
		case ps.Episode == nil:
		case failed:
			// Inside this run's streak a gap; before it, the next good sample settles it.
			gap = inRunStreak(ps.Episode, p.obs)
		default:
			pause(ps)
		}
		if failed && !gap {
			// Worth sampling on while the next sample could be confirmed in this run.
			t.SampleFor = p.retryFor()
		}
	case state.VerdictWedged, state.VerdictDegraded:
		ps.ConsecutiveUnknowns = 0
		if ps.Episode != nil && ps.Episode.Kind != t.Verdict {
			endEpisode(s, p.UID, now, state.EpisodeBecame(t.Verdict))
		}
		p.advanceWedgeClock(*t)
	case state.VerdictNoNodes:
		ps.ConsecutiveUnknowns = 0
		if ps.Episode != nil {
			// Nodes scaled to zero say nothing about discovery: paused, not closed.
			pause(ps)
			break
		}
		p.abandonClaim(t.Verdict)
	default:
		ps.ConsecutiveUnknowns = 0
		endEpisode(s, p.UID, now, state.EpisodeRecovered)
		if t.Verdict == state.VerdictHealthy {
			endBackoffOnceHealthy(s, now, p.cfg)
			p.noteHealed()
			t.SampleFor = p.noteRolling()
		}
		p.abandonClaim(t.Verdict)
	}
	if ps.Rolling != nil && now.Sub(ps.Rolling.Since) > RollRearm {
		ps.Rolling = nil
	}
	ps.LastVerdict = t.Verdict
	return gap
}

// gapTarget reports a pod whose sample failed inside this run's streak: what the run
// saw it to be, not restarted on this sample, sampled on while a restart can come due.
func (p *judgedPod) gapTarget(t Target) Target {
	e, cfg := p.rec.Episode, p.cfg
	failed := t.Reason
	t.Verdict, t.BadSince, t.BadFor, t.Evidence = e.Kind, new(e.Since), e.For, e.Evidence
	t.Reason = fmt.Sprintf("this sample failed (%s); %s for %s (%s evidence) as of the last sample", failed, e.Kind, ShortDuration(e.For.D()), e.Evidence)
	due, sampleFor, confirming := dueGate(e, p.now, cfg)
	t.SampleFor, t.Confirming = sampleFor, confirming
	if due.OK {
		t.SampleFor = new(time.Duration)
	}
	t.Gates = []Gate{{Name: gateDuration, Detail: "this sample failed: the wedge clock waits for the next sample, which decides whether the gap is counted"}}
	t.Action = state.ActionWait
	if e.Kind == state.VerdictDegraded && !cfg.RestartOnDegraded {
		t.Action = state.ActionNone
	}
	return t
}

// advanceWedgeClock extends or starts the bad episode and its in-run streak
// (docs/design.md §2, "The wedge clock").
func (p *judgedPod) advanceWedgeClock(t Target) {
	ps, obs, now, verdict := p.rec, p.obs, p.now, t.Verdict
	// Where this run's streak begins if it begins now: this sample, or the run's
	// first when every earlier sample of it failed and is bridged.
	since := now
	if ps.Episode == nil || ps.Episode.Kind != verdict {
		since = p.rolledAt(t)
		// The count before this sample, else this one's: a bad verdict has a sample.
		baseline := ptr.Deref(p.prevCounters, state.Counters{HeartbeatRejected: p.Sample.HeartbeatRejected}).HeartbeatRejected
		ps.Episode = &state.OpenEpisode{Kind: verdict, Since: now, Last: now, BaselineRejected: &baseline}
		if ps.Counters != nil {
			ps.Episode.FirstCounters = new(*ps.Counters)
		}
	} else {
		e := ps.Episode
		// Only failed samples since (a pause clears RunSince), bridged.
		bridging := p.prevVerdict == state.VerdictUnknown && e.RunSince != nil && bridged(e, t.Evidence, ps.Counters, inRunStreak(e, obs))
		switch {
		case (p.prevVerdict == verdict || bridging) && now.After(e.Last):
			e.For += state.Duration(now.Sub(e.Last))
			if bridging && obs.RunStart.After(e.Last) && !obs.RunStart.After(now) {
				since = obs.RunStart
			}
		case p.prevVerdict == state.VerdictUnknown:
			// Ready may have come back unseen: both confirmations start over.
			e.StrongSince, e.RunSince = nil, nil
		}
		e.Last = now
	}
	bad := ps.Episode
	if !inRunStreak(bad, obs) {
		bad.RunSince, bad.Run = &since, obs.RunStart
	}
	if p.cfg.ConfirmWindow > 0 && now.Sub(*bad.RunSince) >= p.cfg.ConfirmWindow &&
		(bad.ConfirmedRun == nil || !bad.ConfirmedRun.Equal(bad.Run)) {
		// First in-run confirmation of this run. It chains with an earlier run's only
		// across a pause: without one, the duration path already counts the time.
		if bad.ConfirmedRun != nil && bad.PausedSinceConfirmed {
			bad.ConfirmedRuns++
		} else {
			bad.ConfirmedRuns = 1
		}
		bad.ConfirmedRun, bad.PausedSinceConfirmed = new(bad.Run), false
	}
	if t.Evidence == state.EvidenceStrong && bad.StrongSince == nil {
		bad.StrongSince = new(since) // now, or where a roll began (rolledAt)
	}
	bad.Evidence = map[bool]state.Evidence{true: state.EvidenceStrong, false: state.EvidenceWeak}[bad.StrongSince != nil]
	bad.Ready, bad.Expected = ptr.Deref(t.Ready, bad.Ready), ptr.Deref(t.Expected, bad.Expected)
}

// bridged reports whether a gap of failed samples in episode e can be counted, given
// the sample after it (docs/design.md §2, "The wedge clock").
func bridged(e *state.OpenEpisode, evidence state.Evidence, cur *state.Counters, inRun bool) bool {
	if inRun && e.StrongSince != nil && evidence == state.EvidenceStrong {
		return true
	}
	first := e.FirstCounters
	return e.Kind == state.VerdictWedged && first != nil && cur != nil &&
		cur.HeartbeatOK == first.HeartbeatOK && cur.HeartbeatRejected == first.HeartbeatRejected
}

// ageCounters keeps a reading at least two back-off caps old for weigh: a pass every
// 30 s needs it to see nodes backing off.
func ageCounters(ps *state.Pod, now time.Time) {
	const span = 2 * HeartbeatBackoffCap
	if a := ps.AgingCounters; a != nil && now.Sub(a.At) >= span {
		ps.AgedCounters, ps.AgingCounters = a, nil
	}
	if ps.AgingCounters == nil && ps.Counters != nil && (ps.AgedCounters == nil || ps.Counters.At.After(ps.AgedCounters.At)) {
		ps.AgingCounters = new(*ps.Counters)
	}
}

// pause is what an observation without information does to a bad episode: the gap
// is not counted, and both confirmations start over (ready may have come back unseen).
func pause(ps *state.Pod) {
	ps.LastVerdict = state.VerdictUnknown
	ps.Episode.StrongSince = nil
	ps.Episode.Evidence = state.EvidenceWeak
	ps.Episode.RunSince = nil
}

// inRunStreak reports whether the episode's in-run streak belongs to this observation's run.
func inRunStreak(e *state.OpenEpisode, obs Observation) bool {
	return e.RunSince != nil && e.Run.Equal(obs.RunStart)
}

// HeartbeatBackoffCap is the longest a rejected node waits between heartbeats
// (docs/design.md §1): one short interval without a rejection says nothing.
const HeartbeatBackoffCap = 60 * time.Second
