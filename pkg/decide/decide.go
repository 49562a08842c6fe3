package decide

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/agentenv/watchdog/pkg/scrape"
	"github.com/agentenv/watchdog/pkg/state"
)

// Decide judges every pod in obs against prev and returns the next state (prev is not
// modified) and the decision. obs.At is "now".
func Decide(obs Observation, prev *state.State, cfg Config) (*state.State, Result) {
	now := obs.At
	next := prev.Clone()
	var res Result

	judged, notJudged, runProblem := Judged(obs, cfg)
	forgetGonePods(next, obs)
	for _, p := range obs.Pods {
		var t Target
		why, skipped := notJudged[p.UID]
		switch ps := next.Pods[p.UID]; {
		case skipped:
			// A live pod not judged (a standby, no leader) pauses its episode as an unknown does,
			// lest it be "wedged for" the gap once judged again; a dying pod's waits to close.
			if Live(p) && ps != nil && ps.Episode != nil && !newerRecord(next, p.UID, obs) {
				pause(ps)
			}
			t = Target{Pod: p.Name, UID: p.UID, Verdict: "", Action: ActionNone, Reason: "not judged: " + why}
		case newerRecord(next, p.UID, obs) || (ps == nil && obs.KeepNewerRecords && now.Before(next.ObservedAt)):
			t = supersededTarget(p, ps)
		default:
			t = (&judgedPod{Pod: p, obs: obs, cfg: cfg, state: next, now: now, judged: len(judged)}).judge()
		}
		res.Targets = append(res.Targets, t)
	}
	if now.After(next.ObservedAt) {
		next.ObservedAt = now
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
	var ignored string
	if res.Pause, ignored = runPause(obs); ignored != "" {
		res.Warnings = append(res.Warnings, ignored)
	}
	askReads(&res, obs)
	return next, res
}

// CountRun updates the run-level counters once per run (Decide may be called several
// times in one): docs/design.md, "Blind".
func CountRun(s *state.State, verdict Verdict) {
	switch verdict {
	case VerdictUnknown:
		s.ConsecutiveUnknownRuns++
		markRunPaused(s)
	case VerdictWedged, VerdictDegraded:
	default:
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
	o := Observation{At: at, RunStart: last.RunStart, Expected: last.Expected, ExpectedErr: last.ExpectedErr, Leader: last.Leader, Ownership: last.Ownership}
	for _, p := range last.Pods {
		p.Sample, p.ScrapeErr = nil, fmt.Errorf("not observed: %w", err)
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

// newerRecord reports, while merging, whether the other run observed this pod later.
// Outside a merge a record from the future is clock skew, not news.
func newerRecord(s *state.State, uid string, obs Observation) bool {
	ps := s.Pods[uid]
	return obs.KeepNewerRecords && ps != nil && ps.LastSeen.After(obs.At)
}

// supersededTarget reports a pod whose newest record (or absence) comes from a later
// observation than this one: this run does not act on it.
func supersededTarget(p Pod, ps *state.Pod) Target {
	t := Target{Pod: p.Name, UID: p.UID, Judged: true, Action: ActionNone, Verdict: VerdictUnknown}
	if ps == nil {
		t.Reason = "another run observed later and no longer lists this pod: its record stands"
		return t
	}
	t.Verdict = cmp.Or(ps.LastVerdict, VerdictUnknown)
	t.Reason = fmt.Sprintf("another run observed this pod later (at %s, %s): its record stands", ps.LastSeen.UTC().Format(time.RFC3339), t.Verdict)
	if ps.Episode != nil {
		t.BadSince, t.BadFor, t.Evidence = new(ps.Episode.Since), ps.Episode.For, ps.Episode.Evidence
	}
	return t
}

// Live reports a pod that could be judged: neither terminating nor finished
// (Evicted, say, which stays listed until garbage-collected).
func Live(p Pod) bool {
	return !p.Terminating && p.Phase != "Failed" && p.Phase != "Succeeded"
}

// Judged is Decide's selection: which of obs's pods a run judges, why each other is not
// (by UID, as names repeat), and the run's problem when none is. The observer scrapes these.
func Judged(obs Observation, cfg Config) (judged []Pod, notJudged map[string]string, problem string) {
	notJudged = map[string]string{}
	var live []Pod
	for _, p := range obs.Pods {
		switch {
		case p.Terminating:
			notJudged[p.UID] = "terminating"
		case !Live(p):
			notJudged[p.UID] = "finished (pod phase " + p.Phase + ")"
		default:
			live = append(live, p)
		}
	}
	if len(obs.Pods) == 0 {
		return nil, notJudged, "no scheduler pod matches the selector"
	}
	if len(live) == 0 {
		return nil, notJudged, "every scheduler pod is terminating or finished"
	}
	if cfg.JudgePods == JudgeDeployment {
		if live, problem = deploymentsPods(obs.Ownership, live, notJudged); problem != "" {
			return nil, notJudged, problem
		}
	}
	if cfg.MaxPods > 0 && len(live) > cfg.MaxPods {
		// A selector gone wide must not turn into a scrape of each pod.
		why := fmt.Sprintf("%s: %d live pods match the selector, more than --max-pods %d; none is scraped or judged (check --scheduler-selector)",
			tooManyPrefix, len(live), cfg.MaxPods)
		if cfg.JudgePods == JudgeDeployment {
			why = fmt.Sprintf("%s: %d live pods of Deployment %s, more than --max-pods %d; none is scraped or judged",
				tooManyPrefix, len(live), obs.Ownership.Deployment, cfg.MaxPods)
		}
		return nil, notJudged, noneJudged(live, notJudged, why)
	}
	if cfg.LeaderLease == "" {
		return live, notJudged, ""
	}
	if obs.Leader == nil || obs.Leader.Err != nil {
		why := "leader Lease not read"
		if obs.Leader != nil {
			why = fmt.Sprintf("cannot read leader Lease %s: %v", cfg.LeaderLease, obs.Leader.Err)
		}
		return nil, notJudged, noneJudged(live, notJudged, why)
	}
	if end, expired := obs.Leader.ExpiredAt(obs.At); expired && obs.Leader.Holder != "" {
		// The holder may have stepped down for a standby: no restart on a guess.
		return nil, notJudged, noneJudged(live, notJudged, fmt.Sprintf("leader Lease %s held by %q expired at %s (last renewal + leaseDurationSeconds): no current leader",
			cfg.LeaderLease, obs.Leader.Holder, end.UTC().Format(time.RFC3339)))
	}
	for _, p := range live {
		// client-go's leader election names the pod, or "<pod name>_<uuid>".
		if h := obs.Leader.Holder; h == p.Name || strings.HasPrefix(h, p.Name+"_") {
			judged = append(judged, p)
		} else {
			notJudged[p.UID] = fmt.Sprintf("standby (Lease %s is held by %q)", cfg.LeaderLease, obs.Leader.Holder)
		}
	}
	if len(judged) == 0 && obs.Leader.Holder == "" {
		return nil, notJudged, fmt.Sprintf("leader Lease %s has no holder", cfg.LeaderLease)
	}
	if len(judged) == 0 {
		return nil, notJudged, fmt.Sprintf("leader Lease %s is held by %q, which is not a live scheduler pod", cfg.LeaderLease, obs.Leader.Holder)
	}
	return judged, notJudged, ""
}

// noneJudged lists every live pod as not judged for why, the run's problem.
func noneJudged(live []Pod, notJudged map[string]string, why string) string {
	for _, p := range live {
		notJudged[p.UID] = why
	}
	return why
}

// deploymentsPods keeps the live pods whose owner chain, read by UID, leads to the
// scheduler Deployment, and lists the others as not judged.
func deploymentsPods(o *Ownership, live []Pod, notJudged map[string]string) (owned []Pod, problem string) {
	switch {
	case o == nil:
		return nil, noneJudged(live, notJudged, "the scheduler Deployment's pods were not read")
	case o.Err != nil:
		return nil, noneJudged(live, notJudged, fmt.Sprintf("cannot tell the pods of Deployment %s: %v", o.Deployment, o.Err))
	case !o.Found:
		return nil, noneJudged(live, notJudged, fmt.Sprintf("Deployment %s not found: no pod is judged (set --deployment to the scheduler's, or --judge-pods selector for a scheduler that no Deployment runs)", o.Deployment))
	}
	for _, p := range live {
		c, read := o.Chains[p.UID]
		switch {
		case o.Owns(p):
			owned = append(owned, p)
		case read:
			notJudged[p.UID] = fmt.Sprintf("not a pod of Deployment %s: %s", o.Deployment, c.Detail)
		case p.ControllerName == "":
			notJudged[p.UID] = fmt.Sprintf("not a pod of Deployment %s: it has no controller", o.Deployment)
		default:
			notJudged[p.UID] = fmt.Sprintf("not a pod of Deployment %s: its controller is %s %s", o.Deployment, p.ControllerKind, p.ControllerName)
		}
	}
	if len(owned) == 0 {
		return nil, fmt.Sprintf("no live pod of Deployment %s matches the selector (%d other live pod%s, not judged)",
			o.Deployment, len(live), map[bool]string{true: " does", false: "s do"}[len(live) == 1])
	}
	return owned, ""
}

const tooManyPrefix = "too many scheduler pods"

// forgetGonePods drops pods no longer listed, closing their episodes and settling
// restart claims: a claimed restart whose pod is gone did happen.
func forgetGonePods(s *state.State, obs Observation) {
	now := obs.At
	gone := func(uid string) bool {
		return !slices.ContainsFunc(obs.Pods, func(p Pod) bool { return p.UID == uid }) && !newerRecord(s, uid, obs)
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

// endEpisode closes the open episode, if any, of the record s.Pods[uid] into the history.
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

// judgedPod is one pod a Decide call judges: what judging reads, what it updates (the
// state, the pod's record) and what that record said before. The gates only read it.
type judgedPod struct {
	Pod
	obs    Observation
	cfg    Config
	state  *state.State
	now    time.Time
	judged int // pods judged this run
	// rec is the pod's record, for the process observed (freshRecord).
	rec          *state.Pod
	prevVerdict  Verdict
	prevCounters *state.Counters
	// takeOver: completing a restart an earlier run claimed and did not finish.
	takeOver bool
}

// judge decides the pod and updates its record: process, verdict, clock, back-off, gates.
func (p *judgedPod) judge() Target {
	p.freshRecord()
	t, failed := p.verdict()
	t.Pod, t.UID, t.Judged, t.Action = p.Name, p.UID, true, ActionNone
	if p.ScrapeErr != nil {
		t.ScrapeError = p.ScrapeErr.Error()
		t.ScrapeKind = cmp.Or(string(scrape.KindOf(p.ScrapeErr)), "other")
	} else if p.Sample != nil { // the scrape's own doubts come first
		t.Warnings = append(append([]string(nil), p.Sample.Warnings...), t.Warnings...)
	}
	if gap := p.track(failed, &t); gap {
		return p.gapTarget(t)
	}
	e := p.rec.Episode
	if e == nil || !t.Verdict.Bad() {
		return t
	}
	t.BadSince, t.BadFor, t.Evidence = new(e.Since), e.For, e.Evidence
	t.Reason = fmt.Sprintf("%s; %s for %s (%s evidence)", t.Reason, t.Verdict, ShortDuration(t.BadFor.D()), t.Evidence)
	p.takeOver = unfinishedClaim(RestartOf(p.state, p.UID, p.now), p.now, p.cfg) && !slices.Contains(p.obs.ClaimedMeanwhile, p.UID)
	if !p.restartDue(&t) {
		return t
	}
	if !p.takeOver { // completing an unfinished restart judges no earlier one
		t.Ineffective = p.noteIneffective(e)
	}
	p.runGates(&t)
	return t
}

// freshRecord brings the pod's record to the process observed, and keeps what it said.
func (p *judgedPod) freshRecord() {
	s, now := p.state, p.now
	ps := s.Pods[p.UID]
	if ps == nil || !ps.StartedAt.Equal(p.StartedAt) {
		// A new pod, or the container restarted: a new process, a fresh clock.
		if ps != nil {
			endEpisode(s, p.UID, now, state.EpisodeProcessRestarted)
		}
		ps = &state.Pod{Name: p.Name, StartedAt: p.StartedAt, FirstSeen: now}
		s.Pods[p.UID] = ps
	}
	ps.Name = p.Name
	if p.Sample != nil && ps.Counters != nil &&
		(p.Sample.HeartbeatRejected < ps.Counters.HeartbeatRejected || p.Sample.HeartbeatOK < ps.Counters.HeartbeatOK) {
		// Counters only go down when the process restarted.
		endEpisode(s, p.UID, now, state.EpisodeProcessRestarted)
		ps.Counters, ps.AgedCounters, ps.AgingCounters = nil, nil, nil
		ps.FirstSeen = now
	}
	p.rec, p.prevVerdict, p.prevCounters = ps, ps.LastVerdict, ps.Counters
	ps.LastSeen = now
}

// track moves the pod's record on by the verdict of t. It reports a gap: a failed sample
// inside this run's streak, settled by the next (advanceWedgeClock).
func (p *judgedPod) track(failed bool, t *Target) (gap bool) {
	s, ps, now := p.state, p.rec, p.now
	if p.Sample != nil && p.ScrapeErr == nil && t.Verdict != VerdictUnknown {
		t.Ready, t.Expected = new(p.Sample.Ready()), new(p.obs.Expected.Serving)
		ageCounters(ps, now)
		ps.Counters = &state.Counters{HeartbeatOK: p.Sample.HeartbeatOK, HeartbeatRejected: p.Sample.HeartbeatRejected, At: now}
	} else if p.obs.ExpectedErr == nil {
		t.Expected = new(p.obs.Expected.Serving)
	}
	if t.Verdict != VerdictHealthy && s.Backoff != nil {
		// Only an unbroken BackoffReset of healthy observations ends the back-off.
		s.Backoff.HealthySince = nil
	}
	switch t.Verdict {
	case VerdictUnknown:
		ps.ConsecutiveUnknowns++
		switch {
		case ps.Episode == nil:
		case failed && inRunStreak(ps.Episode, p.obs):
			gap = true
		case failed:
			// Before this run saw the pod: the next good sample settles it.
		default:
			pause(ps)
		}
		if failed && !gap {
			// Worth sampling on while the next sample could be confirmed in this run.
			t.SampleFor = p.retryFor()
		}
	case VerdictWedged, VerdictDegraded:
		ps.ConsecutiveUnknowns = 0
		if ps.Episode != nil && ps.Episode.Kind != t.Verdict {
			endEpisode(s, p.UID, now, state.EpisodeBecame(t.Verdict))
		}
		p.advanceWedgeClock(*t)
	case VerdictNoNodes:
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
		if t.Verdict == VerdictHealthy {
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

// noteIneffective records a restart this pod's wedge shows did not heal, and the
// back-off it starts, and returns why (docs/design.md, "Ineffective restarts").
func (p *judgedPod) noteIneffective(e *state.OpenEpisode) string {
	s, cfg := p.state, p.cfg
	if cfg.IneffectiveWithin <= 0 {
		return ""
	}
	r := replacedBy(s, p.Pod, cfg.IneffectiveWithin, p.now)
	if r == nil || e.Since.Sub(p.StartedAt) > cfg.IneffectiveWithin {
		return ""
	}
	if s.Backoff == nil {
		s.Backoff = &state.Backoff{}
	}
	b := s.Backoff
	b.Ineffective++
	wait := cfg.BackoffBase << min(max(b.Ineffective-1, 0), 16)
	if wait <= 0 || wait > cfg.BackoffMax {
		wait = cfg.BackoffMax
	}
	b.LastRestartAt, b.NotBefore, b.HealthySince = r.ClaimedAt, r.ClaimedAt.Add(wait), nil
	b.Reason = fmt.Sprintf("the %s of pod %s at %s did not heal the scheduler: its replacement %s started %s later and was %s again %s after it started; the cause is likely outside the scheduler (its RBAC for EndpointSlices, the network to the nodes)",
		r.Method, r.Pod, r.ClaimedAt.UTC().Format(time.RFC3339), p.Name, ShortDuration(p.StartedAt.Sub(r.ClaimedAt)), e.Kind, ShortDuration(e.Since.Sub(p.StartedAt)))
	r.Ineffective = b.Reason
	return b.Reason
}

// noteHealed records that the restart this healthy pod replaces healed: a later
// wedge of it is a new problem. With the back-off off, the default window applies.
func (p *judgedPod) noteHealed() {
	within := cmp.Or(max(p.cfg.IneffectiveWithin, 0), DefaultIneffectiveWithin)
	if r := replacedBy(p.state, p.Pod, within, p.now); r != nil {
		r.HealedAt = new(p.now)
	}
}

// replacedBy returns the latest restart, done and not yet judged, of another pod at
// most within before this process started. Records dated ahead are passed over.
func replacedBy(s *state.State, p Pod, within time.Duration, now time.Time) *state.Restart {
	for i := len(s.Restarts) - 1; i >= 0; i-- {
		r := &s.Restarts[i]
		if r.Outcome != state.RestartDone || r.UID == p.UID || datedAhead(*r, now) {
			continue
		}
		// Pod timestamps have whole seconds: a replacement started in the second
		// of the claim counts as started after it.
		claimed := r.ClaimedAt.Truncate(time.Second)
		if r.Ineffective != "" || r.HealedAt != nil || p.StartedAt.Before(claimed) || p.StartedAt.Sub(claimed) > within {
			return nil
		}
		return r
	}
	return nil
}

// endBackoffOnceHealthy ends the back-off once the scheduler stayed healthy for BackoffReset.
func endBackoffOnceHealthy(s *state.State, now time.Time, cfg Config) {
	switch b := s.Backoff; {
	case b == nil:
	case b.HealthySince == nil:
		b.HealthySince = new(now)
	case now.Sub(*b.HealthySince) >= cfg.BackoffReset:
		s.Backoff = nil
	}
}

// verdict judges the observation into a target's verdict, reason, evidence, age and
// doubts, and reports a failed sample: an unknown because a read failed, not because
// of the pod. It reads the pod's record, never writes it (docs/design.md §2, "Verdicts").
func (p *judgedPod) verdict() (t Target, failed bool) {
	now, cfg := p.now, p.cfg
	if !p.Running {
		why := "scheduler container is not running"
		if p.WaitingReason != "" {
			why += " (" + p.WaitingReason + ")"
		}
		return Target{Verdict: VerdictUnknown, Reason: why}, false
	}
	if p.StartedAt.IsZero() {
		return Target{Verdict: VerdictUnknown, Reason: "no start time for the scheduler container or the pod"}, false
	}
	age, skew := now.Sub(p.StartedAt), ""
	if p.StartedAt.After(now.Add(ClockSkewTolerance)) {
		// The node's clock runs ahead: the process is as old as the watchdog watched it.
		ahead := fmt.Sprintf("container start %s is %s in the future: clock skew, the node's clock runs ahead", p.StartedAt.UTC().Format(time.RFC3339), ShortDuration(p.StartedAt.Sub(now)))
		watched := now.Sub(p.rec.FirstSeen)
		if p.rec.FirstSeen.IsZero() || watched < cfg.StartupGrace {
			return Target{Verdict: VerdictUnknown, Reason: fmt.Sprintf("%s; judged once the watchdog has watched it for --startup-grace %s by its own clock", ahead, ShortDuration(cfg.StartupGrace))}, false
		}
		age, skew = watched, fmt.Sprintf("%s; its age is taken as the %s the watchdog has watched it", ahead, ShortDuration(watched))
	}
	t, failed = p.agedVerdict(age)
	t.Age = age
	if skew != "" {
		t.Warnings = append(t.Warnings, skew)
	}
	return t, failed
}

// agedVerdict is verdict for a process of a known age.
func (p *judgedPod) agedVerdict(age time.Duration) (Target, bool) {
	if age < p.cfg.StartupGrace {
		return Target{Verdict: VerdictStarting, Reason: fmt.Sprintf("scheduler started %s ago, within the %s startup grace", ShortDuration(max(age, 0)), ShortDuration(p.cfg.StartupGrace))}, false
	}
	if p.obs.ExpectedErr != nil {
		return Target{Verdict: VerdictUnknown, Reason: fmt.Sprintf("cannot count serving nodes: %v", p.obs.ExpectedErr)}, true
	}
	if p.ScrapeErr != nil {
		return Target{Verdict: VerdictUnknown, Reason: fmt.Sprintf("metrics unreadable: %v", p.ScrapeErr)}, true
	}
	if p.Sample == nil {
		return Target{Verdict: VerdictUnknown, Reason: "metrics not scraped"}, true
	}
	ready, expected := p.Sample.Ready(), p.obs.Expected.Serving
	var t Target
	if ready > expected {
		t.Warnings = append(t.Warnings, fmt.Sprintf("the scheduler counts %d ready node(s) but the API server lists only %d serving: check --nodes-service and --nodes-port, or the count is stale", ready, expected))
	}
	evidence, evidenceWhy, noEarlierCounters := weigh(p.Pod, p.rec, p.cfg)
	switch {
	case ready == 0 && expected == 0:
		t.Verdict, t.Reason = VerdictNoNodes, "the API server lists no serving node endpoints, so 0 ready is the truth"
	case ready == 0:
		t.Verdict, t.Reason = VerdictWedged, fmt.Sprintf("ready 0 while the API server lists %d serving node(s); %s", expected, evidenceWhy)
		t.Evidence, t.NoEarlierCounters = evidence, noEarlierCounters
	case ready < expected && (evidence == EvidenceStrong || (p.prevVerdict == VerdictDegraded && p.rec.Episode != nil)):
		t.Verdict, t.Reason = VerdictDegraded, fmt.Sprintf("ready %d of %d serving node(s); %s", ready, expected, evidenceWhy)
		t.Evidence, t.NoEarlierCounters = evidence, noEarlierCounters
	case ready < expected:
		t.Verdict, t.Reason = VerdictHealthy, fmt.Sprintf("ready %d of %d serving node(s), no heartbeats rejected since last observation", ready, expected)
	default:
		t.Verdict, t.Reason = VerdictHealthy, fmt.Sprintf("ready %d, %d serving node(s) listed", ready, expected)
	}
	return t, false
}

// weigh compares the scrape with earlier readings of the process (design.md §2, "Evidence").
func weigh(p Pod, ps *state.Pod, cfg Config) (Evidence, string, bool) {
	// In float seconds: an age of years (a watch that never delivered) overflows a
	// time.Duration, and is exactly the case to catch.
	if age := p.Sample.WatchAge; cfg.MaxWatchAge > 0 && age != nil && *age > cfg.MaxWatchAge.Seconds() {
		return EvidenceStrong, fmt.Sprintf("the discovery watch saw no event for %s (> --max-watch-age %s)", ageString(*age), ShortDuration(cfg.MaxWatchAge)), false
	}
	cur := p.Sample.HeartbeatRejected
	if ps.Episode != nil && ps.Episode.BaselineRejected != nil && cur > *ps.Episode.BaselineRejected {
		return EvidenceStrong, fmt.Sprintf("%d heartbeat(s) rejected since the episode began at %s: discovery does not know nodes that are calling in",
			cur-*ps.Episode.BaselineRejected, ps.Episode.Since.UTC().Format(time.RFC3339)), false
	}
	if ps.Counters == nil {
		return EvidenceWeak, "no earlier counter value of this process to compare with", true
	}
	for _, c := range []*state.Counters{ps.Counters, ps.AgedCounters} {
		if c != nil && cur > c.HeartbeatRejected {
			return EvidenceStrong, fmt.Sprintf("%d heartbeat(s) rejected since %s: discovery does not know nodes that are calling in",
				cur-c.HeartbeatRejected, c.At.UTC().Format(time.RFC3339)), false
		}
	}
	since := cmp.Or(ps.AgedCounters, ps.Counters).At
	return EvidenceWeak, fmt.Sprintf("no rejected heartbeats since %s: the nodes may not reach the scheduler", since.UTC().Format(time.RFC3339)), false
}

const (
	// GaugeRefresh is how often the scheduler rewrites its gauges.
	GaugeRefresh = 15 * time.Second
	// RollWatch is how long after the first rejected heartbeats a roll is followed:
	// the gauge shows the old nodes' records dropped 40-55 s after, with margin.
	RollWatch = 75 * time.Second
	// RollRearm is how long a followed roll keeps another from being followed: a
	// node rejected for good must not make every pass sample for RollWatch.
	RollRearm = 10 * time.Minute
)

// noteRolling follows a roll into dead discovery before the gauge shows it (design.md
// §2, "Evidence"), returning how long to sample on (nil: nothing to follow).
func (p *judgedPod) noteRolling() *time.Duration {
	obs := p.obs
	if p.Sample == nil || p.ScrapeErr != nil || p.cfg.ConfirmWindow <= 0 || obs.Expected.Serving == 0 || p.Sample.Ready() < obs.Expected.Serving {
		return nil
	}
	now, cur := obs.At, p.Sample.HeartbeatRejected
	r := p.rec.Rolling
	switch {
	case r == nil:
		if p.prevCounters == nil || cur <= p.prevCounters.HeartbeatRejected {
			return nil
		}
		p.rec.Rolling = &state.Rolling{Since: now, Run: obs.RunStart, Rejected: cur}
		r = p.rec.Rolling
	case !r.Run.Equal(obs.RunStart) || now.Sub(r.Since) > RollWatch:
		return nil // followed in an earlier run, or over: not again before RollRearm
	case !r.Established && now.Sub(r.Since) >= GaugeRefresh && cur > r.Rejected:
		r.Established = true
	}
	return new(RollWatch - now.Sub(r.Since))
}

// rolledAt is where strong evidence and this run's streak count from when a wedge
// opens right after an established roll of this run; nil: from this sample.
func (p *judgedPod) rolledAt(t Target) *time.Time {
	r := p.rec.Rolling
	if r == nil || !r.Established || t.Verdict != VerdictWedged || t.Evidence != EvidenceStrong || p.prevVerdict != VerdictHealthy ||
		!r.Run.Equal(p.obs.RunStart) || p.now.Sub(r.Since) > RollWatch || p.cfg.ConfirmWindow <= 0 {
		return nil
	}
	return new(r.Since)
}

// HeartbeatBackoffCap is the longest a rejected node waits between heartbeats
// (docs/design.md §1): one short interval without a rejection says nothing.
const HeartbeatBackoffCap = 60 * time.Second

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
	ps.LastVerdict = VerdictUnknown
	ps.Episode.StrongSince = nil
	ps.Episode.Evidence = EvidenceWeak
	ps.Episode.RunSince = nil
}

// inRunStreak reports whether the episode's in-run streak belongs to this observation's run.
func inRunStreak(e *state.OpenEpisode, obs Observation) bool {
	return e.RunSince != nil && e.Run.Equal(obs.RunStart)
}

// abandonClaim settles a claim left by a crashed run on a pod that is fine: moot.
func (p *judgedPod) abandonClaim(verdict Verdict) {
	if r := RestartOf(p.state, p.UID, p.now); r != nil && r.Outcome == state.RestartClaimed {
		r.Outcome = state.RestartAbandoned
		r.Error = fmt.Sprintf("pod %s was %s when checked again", p.Name, verdict)
	}
}

// retryFor is how long sampling on after a failed sample can still make a restart
// due in this run: what the episode needs, or a whole confirmation.
func (p *judgedPod) retryFor() *time.Duration {
	if e := p.rec.Episode; e != nil {
		if !inRunStreak(e, p.obs) { // the next sample starts this run's confirmation
			c := *e
			c.RunSince, c.StrongSince = nil, nil
			e = &c
		}
		_, sampleFor, _ := dueGate(e, p.now, p.cfg)
		return sampleFor
	}
	return new(cmp.Or(max(p.cfg.ConfirmWindow, 0), p.cfg.WedgedFor))
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
	t.Action = ActionWait
	if e.Kind == VerdictDegraded && !cfg.RestartOnDegraded {
		t.Action = ActionNone
	}
	return t
}

// advanceWedgeClock extends or starts the bad episode and its in-run streak
// (docs/design.md §2, "The wedge clock").
func (p *judgedPod) advanceWedgeClock(t Target) {
	ps, obs, now, verdict := p.rec, p.obs, p.now, t.Verdict
	// since is where this run's streak begins if it begins now: this sample, or
	// the run's first when every earlier sample of it failed and is bridged.
	since := now
	if ps.Episode == nil || ps.Episode.Kind != verdict {
		if r := p.rolledAt(t); r != nil {
			since = *r
		}
		baseline := p.Sample.HeartbeatRejected // a bad verdict has a sample
		if p.prevCounters != nil {
			baseline = p.prevCounters.HeartbeatRejected
		}
		ps.Episode = &state.OpenEpisode{Kind: verdict, Since: now, Last: now, BaselineRejected: &baseline}
		if ps.Counters != nil {
			ps.Episode.FirstCounters = new(*ps.Counters)
		}
	} else {
		e := ps.Episode
		// Only failed samples since (a pause clears RunSince), bridged.
		bridging := p.prevVerdict == VerdictUnknown && e.RunSince != nil && bridged(e, t.Evidence, ps.Counters, inRunStreak(e, obs))
		switch {
		case (p.prevVerdict == verdict || bridging) && now.After(e.Last):
			e.For += state.Duration(now.Sub(e.Last))
			if bridging && obs.RunStart.After(e.Last) && !obs.RunStart.After(now) {
				since = obs.RunStart
			}
		case p.prevVerdict == VerdictUnknown:
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
	if t.Evidence == EvidenceStrong && bad.StrongSince == nil {
		bad.StrongSince = new(since) // now, or where a roll began (rolledAt)
	}
	bad.Evidence = EvidenceWeak
	if bad.StrongSince != nil {
		bad.Evidence = EvidenceStrong
	}
	if t.Ready != nil {
		bad.Ready = *t.Ready
	}
	if t.Expected != nil {
		bad.Expected = *t.Expected
	}
}

// bridged reports whether a gap of failed samples in episode e can be counted, given
// the sample after it (docs/design.md §2, "The wedge clock").
func bridged(e *state.OpenEpisode, evidence Evidence, cur *state.Counters, inRun bool) bool {
	if inRun && e.StrongSince != nil && evidence == EvidenceStrong {
		return true
	}
	first := e.FirstCounters
	return e.Kind == VerdictWedged && first != nil && cur != nil &&
		cur.HeartbeatOK == first.HeartbeatOK && cur.HeartbeatRejected == first.HeartbeatRejected
}

// summarize picks the run's verdict and action: the worst among judged pods.
func summarize(targets []Target, runProblem string) (Verdict, Action, string) {
	judged := slices.DeleteFunc(slices.Clone(targets), func(t Target) bool { return !t.Judged })
	if len(judged) == 0 {
		return VerdictUnknown, ActionNone, cmp.Or(runProblem, "no scheduler pod could be judged")
	}
	byAction := func(a, b Target) int { return cmp.Compare(actionRank[a.Action], actionRank[b.Action]) }
	worst := slices.MaxFunc(judged, func(a, b Target) int {
		return cmp.Or(cmp.Compare(severity[a.Verdict], severity[b.Verdict]), byAction(a, b))
	})
	reason := worst.Pod + ": " + worst.Reason
	if len(worst.Gates) > 0 {
		reason += "; " + GateSummary(worst)
	}
	return worst.Verdict, slices.MaxFunc(judged, byAction).Action, reason
}

// ageString prints an age in seconds, as a duration while one can hold it.
func ageString(seconds float64) string {
	if seconds < float64(math.MaxInt64/int64(time.Second)) {
		return ShortDuration(time.Duration(seconds * float64(time.Second)))
	}
	return fmt.Sprintf("%.3gs", seconds)
}

// ShortDuration prints 7m12s rather than 7m12.345678s, and 4m rather than 4m0s.
func ShortDuration(d time.Duration) string {
	d = d.Round(time.Second)
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
