package decide

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/agentenv/watchdog/pkg/state"
)

// Decide judges every pod in obs against prev and returns the next state (prev is not
// modified) and the decision. obs.At is "now".
func Decide(obs Observation, prev *state.State, cfg Config) (*state.State, Result) {
	now := obs.At
	next := prev.Clone()
	var res Result

	judged, notJudged, runProblem := Judged(obs, cfg.Selection)
	forgetGonePods(next, obs)
	for _, p := range obs.Pods {
		why, skipped := notJudged[p.UID]
		if !skipped {
			jp := &judgedPod{Pod: p, obs: obs, cfg: cfg, state: next, now: now, judged: len(judged)}
			res.Targets = append(res.Targets, jp.judge())
			continue
		}
		// A live pod not judged (a standby, no leader) pauses its episode as an unknown does,
		// lest it be "wedged for" the gap once judged again; a dying pod's waits to close.
		if ps := next.Pods[p.UID]; Live(p) && ps != nil && ps.Episode != nil {
			pause(ps)
		}
		res.Targets = append(res.Targets, Target{Pod: p.Name, UID: p.UID, Action: state.ActionNone,
			Reason: "not judged: " + why})
	}
	sort.SliceStable(res.Targets, func(i, j int) bool {
		if res.Targets[i].Judged != res.Targets[j].Judged {
			return res.Targets[i].Judged
		}
		return res.Targets[i].Pod < res.Targets[j].Pod
	})

	res.Verdict, res.Action, res.Reason = summarize(res.Targets, runProblem)
	if cfg.MaxPods > 0 && len(judged) == 0 && strings.HasPrefix(runProblem, tooManyPrefix) {
		res.Warnings = append(res.Warnings, runProblem)
	}
	res.Warnings = append(res.Warnings, datedAheadWarnings(next, now, cfg)...)
	notePause(next, &res, obs)
	askReads(&res, obs)
	return next, res
}

// CountRun updates the run-level counters once per run (Decide may be called several
// times in one): docs/design.md, "Blind".
func CountRun(s *state.State, verdict state.Verdict) {
	if verdict == state.VerdictUnknown {
		s.ConsecutiveUnknownRuns++
		markRunPaused(s)
	} else if !verdict.Bad() {
		s.ConsecutiveUnknownRuns = 0
	}
}

// RunFailed books a run that observed nothing like an unknown for every pod: the gap
// is not counted towards a wedge, and confirmation starts over.
func RunFailed(s *state.State) {
	for _, ps := range s.Pods {
		if ps.Episode != nil {
			pause(ps)
		}
	}
	markRunPaused(s)
}

// Unseen is the observation of a sample that could not be taken at all: the pods of
// the run's last observation, each unread for err, judged as failed samples.
func Unseen(last Observation, at time.Time, err error) Observation {
	o := Observation{At: at, RunStart: last.RunStart, Expected: last.Expected, ExpectedErr: last.ExpectedErr, unseen: true,
		Leader: last.Leader, Ownership: last.Ownership, Probing: last.Probing, HoldOnAlerts: last.HoldOnAlerts}
	for _, p := range last.Pods {
		p.Sample, p.ScrapeErr, p.Probe = nil, fmt.Errorf("not observed: %w", err), nil
		o.Pods = append(o.Pods, p)
	}
	return o
}

// LeaveShadow prepares a shadow-mode run's state for the first live run: no episode
// is restarted without a fresh confirmation (or --wedged-for of live observations).
func LeaveShadow(s *state.State, cfg Config) {
	for _, ps := range s.Pods {
		if ps.Episode == nil {
			continue
		}
		pause(ps)
		ps.Episode.ConfirmedRun, ps.Episode.ConfirmedRuns, ps.Episode.PausedSinceConfirmed = nil, 0, false
		if cfg.ConfirmWindow <= 0 {
			ps.Episode.For = 0
		}
	}
}

// markRunPaused records a whole run that could not see the scheduler after an in-run
// confirmation: "confirmed in two runs" chains across such runs only.
func markRunPaused(s *state.State) {
	for _, ps := range s.Pods {
		if ps.Episode != nil && ps.Episode.ConfirmedRun != nil {
			ps.Episode.PausedSinceConfirmed = true
		}
	}
}

// forgetGonePods drops pods no longer listed, closing their episodes and settling
// restart claims: a claimed restart whose pod is gone did happen.
func forgetGonePods(s *state.State, obs Observation) {
	now := obs.At
	gone := func(uid string) bool {
		return !slices.ContainsFunc(obs.Pods, func(p Pod) bool { return p.UID == uid })
	}
	for i := range s.Restarts {
		if r := &s.Restarts[i]; r.Outcome == state.RestartClaimed && gone(r.UID) {
			r.Outcome = state.RestartDone
			r.DoneAt = &now
			r.Error = "the run that claimed this restart did not record it; the pod was gone when checked again"
		}
	}
	for _, uid := range slices.Sorted(maps.Keys(s.Pods)) {
		if !gone(uid) {
			continue
		}
		outcome := state.EpisodeGone
		if r := RestartOf(s, uid, now); r != nil && r.Outcome == state.RestartDone {
			outcome = state.EpisodeRestarted
		}
		endEpisode(s, uid, now, outcome)
		delete(s.Pods, uid)
	}
}

// endEpisode moves the open episode, if any, of s.Pods[uid] into the history.
func endEpisode(s *state.State, uid string, now time.Time, outcome state.EpisodeOutcome) {
	ps := s.Pods[uid]
	if ps.Episode == nil {
		return
	}
	s.Episodes = append(s.Episodes, state.Episode{
		Pod: ps.Name, UID: uid, Kind: ps.Episode.Kind, Evidence: ps.Episode.Evidence,
		From: ps.Episode.Since, To: now, Outcome: outcome,
	})
	ps.Episode = nil
}

// summarize picks the run's verdict and action: the worst among judged pods.
func summarize(targets []Target, runProblem string) (state.Verdict, state.Action, string) {
	judged := slices.DeleteFunc(slices.Clone(targets), func(t Target) bool { return !t.Judged })
	if len(judged) == 0 {
		return state.VerdictUnknown, state.ActionNone, cmp.Or(runProblem, "no scheduler pod could be judged")
	}
	byAction := func(a, b Target) int {
		return cmp.Compare(slices.Index(actionRank, a.Action), slices.Index(actionRank, b.Action))
	}
	worst := slices.MaxFunc(judged, func(a, b Target) int {
		return cmp.Or(cmp.Compare(slices.Index(severity, a.Verdict), slices.Index(severity, b.Verdict)), byAction(a, b))
	})
	reason := worst.Pod + ": " + worst.Reason
	if len(worst.Gates) > 0 {
		reason += "; " + GateSummary(worst)
	}
	return worst.Verdict, slices.MaxFunc(judged, byAction).Action, reason
}

// ShortDuration prints 7m12s rather than 7m12.345678s, 4m rather than 4m0s, 1h rather than 1h0m0s.
func ShortDuration(d time.Duration) string {
	s := d.Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
		if strings.HasSuffix(s, "h0m") {
			s = strings.TrimSuffix(s, "0m")
		}
	}
	return s
}
