package decide

import (
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

	judged, notJudged, runProblem := selectTargets(obs, cfg)
	present := map[string]bool{}
	for _, p := range obs.Pods {
		present[p.UID] = true
	}
	forgetGonePods(next, present, obs)

	for _, p := range notJudged {
		if p.live && !newerRecord(next, p.pod.UID, obs) {
			pauseClock(next, p.pod)
		}
		res.Targets = append(res.Targets, Target{Pod: p.pod.Name, UID: p.pod.UID, Verdict: "", Action: ActionNone, Reason: "not judged: " + p.why})
	}
	for _, p := range judged {
		var t Target
		if ps := next.Pods[p.UID]; newerRecord(next, p.UID, obs) || (ps == nil && obs.Merge && now.Before(next.ObservedAt)) {
			t = supersededTarget(p, ps)
		} else {
			t = judgePod(p, obs, next, cfg, len(judged))
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
	// A target that reached the rollout gate without the Deployment read was
	// blocked by it: read the Deployment and decide again.
	res.NeedRollout = obs.Rollout == nil && slices.ContainsFunc(res.Targets, func(t Target) bool {
		return slices.ContainsFunc(t.Gates, func(g Gate) bool { return g.Name == gateRollout })
	})
	res.NeedConsistentRead = !obs.Consistent && obs.ConsistentErr == nil && slices.ContainsFunc(res.Targets, func(t Target) bool {
		return slices.ContainsFunc(t.Gates, func(g Gate) bool { return g.Name == gateConsistent && !g.OK })
	})
	return next, res
}

// CountRun updates the run-level counters once per run (Decide may be called several
// times in one run while a wedge is being confirmed). Unknown runs count towards
// blind until a run sees the scheduler fine; the bad runs of an open episode do not
// reset the count, or a wedge seen only every other run would never be blind.
func CountRun(s *state.State, verdict Verdict) {
	switch verdict {
	case VerdictUnknown:
		s.UnknownRuns++
		markRunPaused(s)
	case VerdictWedged, VerdictDegraded:
	default:
		s.UnknownRuns = 0
	}
}

// RunFailed books a run that observed nothing (the pods could not be listed, or
// the run failed before its decision was written) like an unknown for every pod:
// the gap it leaves is not counted towards a wedge, and confirmation starts over.
func RunFailed(s *state.State) {
	for _, ps := range s.Pods {
		if ps.Bad != nil {
			pause(ps)
		}
	}
	markRunPaused(s)
}

// markRunPaused records a whole run that could not see the scheduler (unknown, or
// failed) after an in-run confirmation: the "confirmed in two runs" path chains
// confirmations across such runs only, never across one failed sample inside a run.
func markRunPaused(s *state.State) {
	for _, ps := range s.Pods {
		if ps.Bad != nil && ps.Bad.ConfirmedRun != nil {
			ps.Bad.PausedSince = true
		}
	}
}

// newerRecord reports, while merging this run's observation into another run's
// state (obs.Merge), whether that run observed this pod after this one: its record
// stands, and an older observation never rewinds it. Outside a merge a record from
// the future is clock skew between runs, not news: the pod is judged as usual.
func newerRecord(s *state.State, uid string, obs Observation) bool {
	ps := s.Pods[uid]
	return obs.Merge && ps != nil && ps.LastSeen.After(obs.At)
}

// supersededTarget reports a pod whose newest record comes from a later observation
// than this one (this run's write lost to a run that observed later, or the pod
// was forgotten by it): the later record is the truth, this run does not act on it.
func supersededTarget(p Pod, ps *state.Pod) Target {
	t := Target{Pod: p.Name, UID: p.UID, Judged: true, Action: ActionNone, Verdict: VerdictUnknown}
	if ps == nil {
		t.Reason = "another run observed later and no longer lists this pod: its record stands"
		return t
	}
	if ps.LastVerdict != "" {
		t.Verdict = Verdict(ps.LastVerdict)
	}
	t.Reason = fmt.Sprintf("another run observed this pod later (at %s, %s): its record stands", ps.LastSeen.UTC().Format(time.RFC3339), t.Verdict)
	if ps.Bad != nil {
		since := ps.Bad.Since
		t.BadSince, t.BadFor, t.Evidence = &since, ps.Bad.For, Evidence(ps.Bad.Evidence)
	}
	return t
}

type candidate struct {
	pod Pod
	why string
	// live: still running a scheduler, only not judged this run (a standby, or no
	// current leader). Its bad episode pauses; a terminating or finished pod's
	// episode is left as it was, to be closed when the pod is gone.
	live bool
}

// selectTargets splits pods into those judged and those listed as not judged, and
// returns a run-level problem when nobody can be judged.
func selectTargets(obs Observation, cfg Config) (judged []Pod, notJudged []candidate, problem string) {
	var live []Pod
	for _, p := range obs.Pods {
		if p.Terminating {
			notJudged = append(notJudged, candidate{p, "terminating", false})
			continue
		}
		if p.Phase == "Failed" || p.Phase == "Succeeded" {
			// Finished (Evicted, say): no scheduler runs in it, and it stays
			// listed until garbage-collected.
			notJudged = append(notJudged, candidate{p, "finished (pod phase " + p.Phase + ")", false})
			continue
		}
		live = append(live, p)
	}
	if len(obs.Pods) == 0 {
		return nil, nil, "no scheduler pod matches the selector"
	}
	if len(live) == 0 {
		return nil, notJudged, "every scheduler pod is terminating or finished"
	}
	if cfg.MaxPods > 0 && len(live) > cfg.MaxPods {
		why := TooManyPods(len(live), cfg.MaxPods)
		for _, p := range live {
			notJudged = append(notJudged, candidate{p, why, true})
		}
		return nil, notJudged, why
	}
	if cfg.LeaderLease == "" {
		return live, notJudged, ""
	}
	if obs.Leader == nil || obs.Leader.Err != nil {
		why := "leader Lease not read"
		if obs.Leader != nil {
			why = fmt.Sprintf("cannot read leader Lease %s: %v", cfg.LeaderLease, obs.Leader.Err)
		}
		for _, p := range live {
			notJudged = append(notJudged, candidate{p, why, true})
		}
		return nil, notJudged, why
	}
	if end, expired := obs.Leader.ExpiredAt(obs.At); expired && obs.Leader.Holder != "" {
		// The holder stopped renewing: it may have stepped down, and a standby may
		// be about to take over. Judging it would restart a pod on a guess.
		why := fmt.Sprintf("leader Lease %s held by %q expired at %s (renewTime + leaseDurationSeconds): no current leader",
			cfg.LeaderLease, obs.Leader.Holder, end.UTC().Format(time.RFC3339))
		for _, p := range live {
			notJudged = append(notJudged, candidate{p, why, true})
		}
		return nil, notJudged, why
	}
	for _, p := range live {
		if HolderIs(obs.Leader.Holder, p.Name) {
			judged = append(judged, p)
		} else {
			notJudged = append(notJudged, candidate{p, fmt.Sprintf("standby (Lease %s is held by %q)", cfg.LeaderLease, obs.Leader.Holder), true})
		}
	}
	if len(judged) == 0 {
		holder := obs.Leader.Holder
		if holder == "" {
			return nil, notJudged, fmt.Sprintf("leader Lease %s has no holder", cfg.LeaderLease)
		}
		return nil, notJudged, fmt.Sprintf("leader Lease %s is held by %q, which is not a live scheduler pod", cfg.LeaderLease, holder)
	}
	return judged, notJudged, ""
}

const tooManyPrefix = "too many scheduler pods"

// TooManyPods is the run's reason when more live pods match the selector than
// --max-pods allows: a selector gone wide (or a flood of pods) must not turn into
// a scrape of each and a restart decision on a guess.
func TooManyPods(live, limit int) string {
	return fmt.Sprintf("%s: %d live pods match the selector, more than --max-pods %d; none is scraped or judged (check --scheduler-selector)", tooManyPrefix, live, limit)
}

// HolderIs reports whether a Lease holderIdentity names a pod. client-go's leader
// election commonly uses the pod name, or "<pod name>_<uuid>".
func HolderIs(holder, pod string) bool {
	return holder == pod || strings.HasPrefix(holder, pod+"_")
}

// forgetGonePods drops pods no longer listed, closing their episodes and settling
// restart claims: a claimed restart whose pod is gone did happen (the delete went
// through before the run that claimed it could record it).
func forgetGonePods(s *state.State, present map[string]bool, obs Observation) {
	now := obs.At
	for i := range s.Restarts {
		r := &s.Restarts[i]
		if r.Outcome == state.RestartClaimed && !present[r.UID] && !newerRecord(s, r.UID, obs) {
			r.Outcome = state.RestartDone
			r.DoneAt = &now
			r.Error = "the run that claimed this restart did not record it; the pod was gone when checked again"
		}
	}
	for _, uid := range slices.Sorted(maps.Keys(s.Pods)) {
		if present[uid] || newerRecord(s, uid, obs) {
			// Listed, or seen by a run that observed after this one: not gone.
			continue
		}
		ps := s.Pods[uid]
		if ps.Bad != nil {
			outcome := "gone"
			if r := s.RestartFor(uid); r != nil && r.Outcome == state.RestartDone {
				outcome = "restarted"
			}
			endEpisode(s, uid, ps, now, outcome)
		}
		delete(s.Pods, uid)
	}
}

func endEpisode(s *state.State, uid string, ps *state.Pod, now time.Time, outcome string) {
	s.Episodes = append(s.Episodes, state.Episode{
		Pod: ps.Name, UID: uid, Kind: ps.Bad.Kind, Evidence: ps.Bad.Evidence,
		From: ps.Bad.Since, To: now, Outcome: outcome,
	})
	ps.Bad = nil
}

// judgePod decides one pod and updates its record in s.
func judgePod(p Pod, obs Observation, s *state.State, cfg Config, judgedCount int) Target {
	now := obs.At
	t := Target{Pod: p.Name, UID: p.UID, Judged: true, Action: ActionNone}
	if p.ScrapeErr != nil {
		t.ScrapeError = p.ScrapeErr.Error()
		t.ScrapeKind = string(scrape.KindOf(p.ScrapeErr))
		if t.ScrapeKind == "" {
			t.ScrapeKind = "other"
		}
	}

	ps := s.Pods[p.UID]
	if ps == nil || !ps.StartedAt.Equal(p.StartedAt) {
		// A new pod, or the container restarted: a new process, a fresh clock.
		if ps != nil && ps.Bad != nil {
			endEpisode(s, p.UID, ps, now, "process restarted")
		}
		ps = &state.Pod{Name: p.Name, StartedAt: p.StartedAt, FirstSeen: now}
		s.Pods[p.UID] = ps
	}
	ps.Name = p.Name
	if p.Sample != nil && ps.Counters != nil &&
		(p.Sample.HeartbeatRejected < ps.Counters.HeartbeatRejected || p.Sample.HeartbeatOK < ps.Counters.HeartbeatOK) {
		// Counters only go down when the process restarted; whatever we knew of the
		// old process says nothing about this one.
		if ps.Bad != nil {
			endEpisode(s, p.UID, ps, now, "process restarted")
		}
		ps.Counters = nil
		ps.FirstSeen = now
	}
	prevVerdict := Verdict(ps.LastVerdict)
	prevCounters := ps.Counters
	ps.LastSeen = now

	verdict, reason, evidence, noBaseline := judge(p, obs, ps, cfg, prevVerdict)
	t.Verdict, t.Reason, t.NoBaseline = verdict, reason, noBaseline
	if p.Sample != nil && p.ScrapeErr == nil {
		t.Warnings = append(t.Warnings, p.Sample.Warnings...)
		if ready, serving := p.Sample.Ready(), obs.Expected.Serving; verdict != VerdictUnknown && verdict != VerdictStarting && obs.ExpectedErr == nil && ready > serving {
			t.Warnings = append(t.Warnings, fmt.Sprintf("the scheduler counts %d ready node(s) but the API server lists only %d serving: check --nodes-service and --nodes-port, or the count is stale", ready, serving))
		}
	}
	if !p.StartedAt.IsZero() {
		t.Age = now.Sub(p.StartedAt)
	}
	if p.Sample != nil && p.ScrapeErr == nil && verdict != VerdictUnknown {
		ready, expected := p.Sample.Ready(), obs.Expected.Serving
		t.Ready, t.Expected = &ready, &expected
		ps.Counters = &state.Counters{HeartbeatOK: p.Sample.HeartbeatOK, HeartbeatRejected: p.Sample.HeartbeatRejected, At: now}
	} else if obs.ExpectedErr == nil {
		expected := obs.Expected.Serving
		t.Expected = &expected
	}

	if verdict != VerdictHealthy && s.Backoff != nil {
		// Only an unbroken hour of healthy observations ends the back-off.
		s.Backoff.HealthySince = nil
	}
	switch verdict {
	case VerdictUnknown:
		ps.Unknowns++
		if ps.Bad != nil {
			pause(ps)
		}
	case VerdictWedged, VerdictDegraded:
		ps.Unknowns = 0
		baseline := uint64(0)
		if prevCounters != nil {
			baseline = prevCounters.HeartbeatRejected
		} else if p.Sample != nil {
			baseline = p.Sample.HeartbeatRejected
		}
		if ps.Bad != nil && ps.Bad.Kind != string(verdict) {
			// Degraded became wedged (or back): the history shows both episodes.
			endEpisode(s, p.UID, ps, now, "became "+string(verdict))
		}
		advanceWedgeClock(ps, verdict, evidence, prevVerdict, baseline, obs, cfg, t)
	default:
		ps.Unknowns = 0
		if ps.Bad != nil {
			endEpisode(s, p.UID, ps, now, "recovered")
		}
		if verdict == VerdictHealthy {
			endBackoffAfterHealthyHour(s, now, cfg)
		}
		// A claim left by a crashed run is moot once the pod is fine.
		if r := s.RestartFor(p.UID); r != nil && r.Outcome == state.RestartClaimed {
			r.Outcome = state.RestartAbandoned
			r.Error = fmt.Sprintf("pod %s was %s when checked again", p.Name, verdict)
		}
	}
	ps.LastVerdict = string(verdict)

	if ps.Bad != nil && (verdict == VerdictWedged || verdict == VerdictDegraded) {
		since := ps.Bad.Since
		t.BadSince, t.BadFor = &since, ps.Bad.For
		t.Evidence = Evidence(ps.Bad.Evidence)
		t.Reason = fmt.Sprintf("%s; %s for %s (%s evidence)", t.Reason, verdict, ShortDuration(t.BadFor.D()), t.Evidence)
		decideAction(&t, p, obs, s, ps, cfg, judgedCount)
	}
	return t
}

// judge returns the verdict with its reason, the evidence for a bad verdict, and
// whether there was no earlier counter value of this process to compare with.
func judge(p Pod, obs Observation, ps *state.Pod, cfg Config, prevVerdict Verdict) (Verdict, string, Evidence, bool) {
	now := obs.At
	if !p.Running {
		why := "scheduler container is not running"
		if p.WaitingReason != "" {
			why += " (" + p.WaitingReason + ")"
		}
		return VerdictUnknown, why, "", false
	}
	if p.StartedAt.IsZero() {
		return VerdictUnknown, "no start time for the scheduler container or the pod", "", false
	}
	if p.StartedAt.After(now.Add(ClockSkewTolerance)) {
		return VerdictUnknown, fmt.Sprintf("container start %s is %s in the future: clock skew, the pod's age cannot be trusted",
			p.StartedAt.UTC().Format(time.RFC3339), ShortDuration(p.StartedAt.Sub(now))), "", false
	}
	age := now.Sub(p.StartedAt)
	if age < cfg.StartupGrace {
		return VerdictStarting, fmt.Sprintf("scheduler started %s ago, within the %s startup grace", ShortDuration(max(age, 0)), ShortDuration(cfg.StartupGrace)), "", false
	}
	if obs.ExpectedErr != nil {
		return VerdictUnknown, fmt.Sprintf("cannot count serving nodes: %v", obs.ExpectedErr), "", false
	}
	if p.ScrapeErr != nil {
		return VerdictUnknown, fmt.Sprintf("metrics unreadable: %v", p.ScrapeErr), "", false
	}
	if p.Sample == nil {
		return VerdictUnknown, "metrics not scraped", "", false
	}
	ready, expected := p.Sample.Ready(), obs.Expected.Serving

	evidence, evidenceWhy, noBaseline := weigh(p, ps, cfg)
	switch {
	case ready == 0 && expected == 0:
		return VerdictNoNodes, "the API server lists no serving node endpoints, so 0 ready is the truth", "", false
	case ready == 0:
		return VerdictWedged, fmt.Sprintf("ready 0 while the API server lists %d serving node(s); %s", expected, evidenceWhy), evidence, noBaseline
	case ready < expected && (evidence == EvidenceStrong || (prevVerdict == VerdictDegraded && ps.Bad != nil)):
		return VerdictDegraded, fmt.Sprintf("ready %d of %d serving node(s); %s", ready, expected, evidenceWhy), evidence, noBaseline
	case ready < expected:
		return VerdictHealthy, fmt.Sprintf("ready %d of %d serving node(s), no heartbeats rejected since last observation", ready, expected), "", false
	default:
		return VerdictHealthy, fmt.Sprintf("ready %d, %d serving node(s) listed", ready, expected), "", false
	}
}

// weigh compares the scrape with the previous observation of the same process.
func weigh(p Pod, ps *state.Pod, cfg Config) (Evidence, string, bool) {
	// Compared in float seconds: an age of years (a watch that never delivered an
	// event) overflows a time.Duration, and is exactly the case to catch.
	if age := p.Sample.WatchAge; cfg.MaxWatchAge > 0 && age != nil && *age > cfg.MaxWatchAge.Seconds() {
		return EvidenceStrong, fmt.Sprintf("the discovery watch saw no event for %s (> --max-watch-age %s)", ageString(*age), ShortDuration(cfg.MaxWatchAge)), false
	}
	cur := p.Sample.HeartbeatRejected
	if ps.Bad != nil && ps.Bad.BaselineRejected != nil && cur > *ps.Bad.BaselineRejected {
		return EvidenceStrong, fmt.Sprintf("%d heartbeat(s) rejected since the episode began at %s: discovery does not know nodes that are calling in",
			cur-*ps.Bad.BaselineRejected, ps.Bad.Since.UTC().Format(time.RFC3339)), false
	}
	if ps.Counters == nil {
		return EvidenceWeak, "no earlier counter value of this process to compare with", true
	}
	if cur > ps.Counters.HeartbeatRejected {
		return EvidenceStrong, fmt.Sprintf("%d heartbeat(s) rejected since %s: discovery does not know nodes that are calling in",
			cur-ps.Counters.HeartbeatRejected, ps.Counters.At.UTC().Format(time.RFC3339)), false
	}
	return EvidenceWeak, "no rejected heartbeats since the last observation: the nodes may not reach the scheduler", false
}

// pauseClock records that a pod with a bad episode was not judged this run (a
// standby, or nobody judged for want of a current leader): as with an unknown, the
// gap will not count towards the episode, and strong evidence must be confirmed
// again. Without it, a holder judged again after its Lease expired for ten minutes
// would be "wedged for 10m" on its first observation.
func pauseClock(s *state.State, p Pod) {
	ps := s.Pods[p.UID]
	if ps == nil || ps.Bad == nil {
		return
	}
	pause(ps)
}

// pause is what an observation without information does to a bad episode: the
// clock does not run across it (the next bad observation does not add the gap),
// and both confirmations start over, since ready may have come back unseen.
func pause(ps *state.Pod) {
	ps.LastVerdict = string(VerdictUnknown)
	ps.Bad.StrongSince = nil
	ps.Bad.Evidence = string(EvidenceWeak)
	ps.Bad.RunSince = nil
}

// advanceWedgeClock extends or starts the bad episode. The clock only advances
// between two consecutive observations with the same bad verdict; an unknown in
// between pauses it (that gap is not counted). It also keeps the in-run streak: the
// restart that the episode may make due must be confirmed by this run's samples.
func advanceWedgeClock(ps *state.Pod, verdict Verdict, evidence Evidence, prevVerdict Verdict, baseline uint64, obs Observation, cfg Config, t Target) {
	now := obs.At
	if ps.Bad == nil || ps.Bad.Kind != string(verdict) {
		ps.Bad = &state.Bad{Kind: string(verdict), Since: now, Last: now, BaselineRejected: &baseline}
	} else {
		if prevVerdict == verdict && now.After(ps.Bad.Last) {
			ps.Bad.For += state.Duration(now.Sub(ps.Bad.Last))
		}
		ps.Bad.Last = now
	}
	bad := ps.Bad
	if bad.RunSince == nil || !bad.Run.Equal(obs.RunStart) {
		at := now
		bad.RunSince, bad.Run = &at, obs.RunStart
	}
	if cfg.ConfirmWindow > 0 && now.Sub(*bad.RunSince) >= cfg.ConfirmWindow &&
		(bad.ConfirmedRun == nil || !bad.ConfirmedRun.Equal(bad.Run)) {
		// First in-run confirmation of this run. It chains with an earlier run's
		// only across a pause: with no pause in between, the clock ran and the
		// duration path already counts the time.
		if bad.ConfirmedRun != nil && bad.PausedSince {
			bad.ConfirmedRuns++
		} else {
			bad.ConfirmedRuns = 1
		}
		run := bad.Run
		bad.ConfirmedRun, bad.PausedSince = &run, false
	}
	if evidence == EvidenceStrong && ps.Bad.StrongSince == nil {
		at := now
		ps.Bad.StrongSince = &at
	}
	if ps.Bad.StrongSince != nil {
		ps.Bad.Evidence = string(EvidenceStrong)
	} else {
		ps.Bad.Evidence = string(EvidenceWeak)
	}
	if t.Ready != nil {
		ps.Bad.Ready = *t.Ready
	}
	if t.Expected != nil {
		ps.Bad.Expected = *t.Expected
	}
}

// Gate names.
const (
	gateStartup  = "startup-grace"
	gateDuration = "wedged-for"
	gateOnce     = "once-per-wedge"
	gateSingle   = "single-target"
	gateRollout  = "rollout"
	gateBudget   = "budget"
	gateDegraded = "restart-on-degraded"
	// gateConsistent: a restart is never made on lists from the watch cache.
	gateConsistent = "consistent-read"
	// GateBackoff holds restarts back after restarts that did not heal.
	GateBackoff = "backoff"
)

// decideAction runs the restart gates for a wedged or degraded pod.
func decideAction(t *Target, p Pod, obs Observation, s *state.State, ps *state.Pod, cfg Config, judgedCount int) {
	now := obs.At
	t.Gates = append(t.Gates, Gate{Name: gateStartup, OK: true,
		Detail: fmt.Sprintf("started %s ago ≥ %s", ShortDuration(t.Age), ShortDuration(cfg.StartupGrace))})
	if !dueGate(t, ps.Bad, now, cfg) {
		return
	}
	if ps.Bad.Kind == string(VerdictDegraded) && !cfg.RestartOnDegraded {
		t.Gates = append(t.Gates, Gate{Name: gateDegraded, OK: false, Detail: "degraded pods are alerted, not restarted (--restart-on-degraded=false)"})
		t.Action = ActionNone
		return
	}

	blocked := false
	gate := func(g Gate) {
		t.Gates = append(t.Gates, g)
		if !g.OK {
			blocked = true
		}
	}
	gate(onceGate(t, p, s, now, cfg))
	if judgedCount > 1 {
		gate(Gate{Name: gateSingle, Detail: fmt.Sprintf("%d scheduler pods are judged and no --leader-lease is set: cannot tell which is the leader", judgedCount)})
	} else {
		gate(Gate{Name: gateSingle, OK: true, Detail: "one scheduler pod judged"})
	}
	gate(rolloutGate(p, obs.Rollout, cfg))
	if !t.Resume {
		// Completing an unfinished restart is not a new one: neither the back-off
		// nor the budget holds it back.
		if g, ok := backoffGate(t, p, ps, s, now, cfg); ok {
			gate(g)
		}
		gate(budgetGate(s, now, cfg))
	}
	if !blocked {
		gate(consistentGate(obs))
	}
	if blocked {
		t.Action = ActionBlocked
		markInProgress(t)
		return
	}
	t.Action = ActionRestart
}

// markInProgress: while a restart of this pod is already done or under way, the
// other refusals are consequences of it (the Deployment mid-rollout from the
// watchdog's own rollout restart, the budget it just used), not blocked restarts
// to page about.
func markInProgress(t *Target) {
	if !slices.ContainsFunc(t.Gates, func(g Gate) bool { return g.Name == gateOnce && g.InProgress }) {
		return
	}
	for i := range t.Gates {
		if !t.Gates[i].OK {
			t.Gates[i].InProgress = true
		}
	}
}

// dueGate adds the wedged-for gate and reports whether a restart is due: by
// --wedged-for (the clock across observations) or by strong evidence held over
// --confirm-window, and either way confirmed inside this run: ready stayed bad for
// --confirm-window of this run's samples. Two separate flaps five minutes apart are
// then two short episodes, never a restart. Two runs confirmed in-run with only
// unknown runs between them are due too (a wedge seen only every other run).
func dueGate(t *Target, bad *state.Bad, now time.Time, cfg Config) bool {
	inRun := time.Duration(0)
	if bad.RunSince != nil {
		inRun = now.Sub(*bad.RunSince)
	}
	// A degraded pod that is never restarted needs no in-run confirmation: its
	// gate only decides when the alert says "alerted, not restarted".
	confirmedInRun := cfg.ConfirmWindow <= 0 || inRun >= cfg.ConfirmWindow ||
		(bad.Kind == string(VerdictDegraded) && !cfg.RestartOnDegraded)
	// Strong evidence counts from its first sight in this run at the earliest: a
	// run whose confirmation was cut short by its deadline leaves the next run to
	// confirm again, never to restart on its first sample.
	strongFor := time.Duration(0)
	if bad.StrongSince != nil {
		strongFor = min(now.Sub(*bad.StrongSince), inRun)
	}
	// The confirm-window path is for wedges only: a degraded scheduler still serves
	// some nodes, and is restarted (with --restart-on-degraded) after --wedged-for.
	fastPath := cfg.ConfirmWindow > 0 && bad.StrongSince != nil && bad.Kind == string(VerdictWedged)
	ok := func(detail string) bool {
		t.Gates = append(t.Gates, Gate{Name: gateDuration, OK: true, Detail: detail})
		return true
	}
	inRunDetail := fmt.Sprintf("ready %s throughout %s of this run's samples", readyWord(bad), ShortDuration(inRun))
	switch {
	case bad.For.D() >= cfg.WedgedFor && confirmedInRun:
		return ok(fmt.Sprintf("%s %s ≥ %s, %s", bad.Kind, ShortDuration(bad.For.D()), ShortDuration(cfg.WedgedFor), inRunDetail))
	case fastPath && strongFor >= cfg.ConfirmWindow:
		return ok(fmt.Sprintf("strong evidence held %s ≥ confirm window %s, ready never back", ShortDuration(strongFor), ShortDuration(cfg.ConfirmWindow)))
	case cfg.ConfirmWindow > 0 && bad.ConfirmedRuns >= 2 && confirmedInRun:
		return ok(fmt.Sprintf("confirmed in %d runs separated only by runs that could not see the scheduler; %s", bad.ConfirmedRuns, inRunDetail))
	}

	detail := fmt.Sprintf("%s %s < %s", bad.Kind, ShortDuration(bad.For.D()), ShortDuration(cfg.WedgedFor))
	if bad.For.D() >= cfg.WedgedFor {
		detail = fmt.Sprintf("%s %s ≥ %s, confirming in this run: %s < confirm window %s", bad.Kind, ShortDuration(bad.For.D()), ShortDuration(cfg.WedgedFor), inRunDetail, ShortDuration(cfg.ConfirmWindow))
	}
	var due []time.Duration
	if fastPath {
		detail += fmt.Sprintf("; strong evidence held %s < confirm window %s", ShortDuration(strongFor), ShortDuration(cfg.ConfirmWindow))
		t.Confirming = true
		due = append(due, cfg.ConfirmWindow-strongFor)
	}
	if bad.Kind == string(VerdictWedged) || cfg.RestartOnDegraded {
		due = append(due, max(cfg.WedgedFor-bad.For.D(), cfg.ConfirmWindow-inRun))
		if cfg.ConfirmWindow > 0 && inRun < cfg.ConfirmWindow {
			// Confirmed in-run, this run can chain with a later one across
			// unknown runs (the "confirmed in 2 runs" path).
			due = append(due, cfg.ConfirmWindow-inRun)
		}
	}
	if len(due) > 0 {
		d := max(slices.Min(due), 0)
		t.SampleFor = &d
	}
	t.Gates = append(t.Gates, Gate{Name: gateDuration, OK: false, Detail: detail})
	t.Action = ActionWait
	return false
}

func readyWord(bad *state.Bad) string {
	if bad.Kind == string(VerdictDegraded) {
		return "below the serving nodes"
	}
	return "0"
}

// onceGate refuses a second restart of one pod. A restart already done, or under
// way in another run, is reported as in progress: not a blocked restart, so nobody
// is paged, until the replacement had its startup grace (and a confirm window) to
// take over and the old pod is still here and bad.
func onceGate(t *Target, p Pod, s *state.State, now time.Time, cfg Config) Gate {
	r := s.RestartFor(p.UID)
	if r == nil {
		return Gate{Name: gateOnce, OK: true, Detail: "no restart yet for this pod"}
	}
	claimed := r.ClaimedAt.UTC().Format(time.RFC3339)
	switch r.Outcome {
	case state.RestartDone:
		done := r.ClaimedAt
		if r.DoneAt != nil {
			done = *r.DoneAt
		}
		if grace := cfg.StartupGrace + cfg.ConfirmWindow; now.Sub(done) < grace {
			return Gate{Name: gateOnce, InProgress: true, Detail: fmt.Sprintf("restart already in progress: %s at %s; the replacement has until %s to take over",
				r.Method, done.UTC().Format(time.RFC3339), done.Add(grace).UTC().Format(time.RFC3339))}
		}
		return Gate{Name: gateOnce, Detail: fmt.Sprintf("already restarted at %s (%s), and this pod is still running and bad %s later: the restart did not replace it",
			claimed, r.Method, ShortDuration(now.Sub(done)))}
	case state.RestartClaimed:
		if r.ResumedAt != nil && now.Sub(*r.ResumedAt) < cfg.ClaimTimeout {
			return Gate{Name: gateOnce, InProgress: true, Detail: fmt.Sprintf("restart already in progress: claimed at %s, taken over at %s by another run, which may still be acting", claimed, r.ResumedAt.UTC().Format(time.RFC3339))}
		}
		if now.Sub(r.ClaimedAt) < cfg.ClaimTimeout {
			return Gate{Name: gateOnce, InProgress: true, Detail: fmt.Sprintf("restart already in progress: claimed at %s by another run, which may still be acting", claimed)}
		}
		t.Resume = true
		return Gate{Name: gateOnce, OK: true, Detail: fmt.Sprintf("restart claimed at %s by a run that did not finish it: completing that restart", claimed)}
	default:
		return Gate{Name: gateOnce, OK: true, Detail: fmt.Sprintf("earlier attempt at %s %s", claimed, r.Outcome)}
	}
}

// consistentGate lets a restart through only on lists read with a consistent read.
// While none was attempted the refusal is a step of the pass, not a blocked
// restart: the caller reads again and decides again.
func consistentGate(obs Observation) Gate {
	switch {
	case obs.Consistent:
		return Gate{Name: gateConsistent, OK: true, Detail: "pods and EndpointSlices re-read with a consistent read"}
	case obs.ConsistentErr != nil:
		return Gate{Name: gateConsistent, Detail: fmt.Sprintf("cannot re-read the pods and EndpointSlices with a consistent read: %v", obs.ConsistentErr)}
	default:
		return Gate{Name: gateConsistent, InProgress: true, Detail: "pods and EndpointSlices were read from the API server's watch cache: re-reading them with a consistent read"}
	}
}

func rolloutGate(p Pod, r *Rollout, cfg Config) Gate {
	g := Gate{Name: gateRollout}
	switch {
	case r == nil:
		g.Detail = "Deployment not read yet"
	case r.Err != nil:
		g.Detail = fmt.Sprintf("cannot read Deployment %s: %v", r.Name, r.Err)
	case !r.Found && cfg.RestartMethod == MethodRollout:
		g.Detail = fmt.Sprintf("Deployment %s not found; the rollout method needs it", r.Name)
	case !r.Found:
		g.OK, g.Detail = true, fmt.Sprintf("Deployment %s not found; restarting the pod alone", r.Name)
	case r.Paused:
		g.Detail = fmt.Sprintf("Deployment %s is paused", r.Name)
	case r.InProgress:
		g.Detail = fmt.Sprintf("Deployment %s is mid-rollout: %s", r.Name, r.Detail)
	case cfg.RestartMethod == MethodRollout && !ownedBy(p, r.Name):
		// Rolling the Deployment would not replace this pod: the wedge would stay
		// and count as restarted.
		g.Detail = fmt.Sprintf("pod %s is not run by Deployment %s (controller: %s %q); the rollout method would restart the wrong pods", p.Name, r.Name, orNone(p.ControllerKind), p.ControllerName)
	case cfg.RestartMethod == MethodRollout && !chainVerified(p, r):
		// The names match, but names can be forged: only the chain read by UID says
		// that rolling this Deployment replaces this pod.
		g.Detail = ownerChainDetail(p, r)
	default:
		g.OK, g.Detail = true, fmt.Sprintf("Deployment %s is not rolling out", r.Name)
	}
	return g
}

func budgetGate(s *state.State, now time.Time, cfg Config) Gate {
	from := now.Add(-cfg.RestartWindow)
	used := s.RestartsSince(from)
	if used >= cfg.MaxRestarts {
		return Gate{Name: gateBudget, Detail: fmt.Sprintf("budget %d/%d used in the last %s; next slot %s", used, cfg.MaxRestarts, ShortDuration(cfg.RestartWindow), nextSlot(s, from, cfg))}
	}
	return Gate{Name: gateBudget, OK: true, Detail: fmt.Sprintf("budget %d/%d used in the last %s", used, cfg.MaxRestarts, ShortDuration(cfg.RestartWindow))}
}

// backoffGate holds a restart back while restarts are not healing. A restart did
// not heal when this pod is the replacement of a restarted one (it started after
// that restart) and its wedge began within IneffectiveWithin of its start: the
// cause is outside the scheduler (RBAC, the network to the nodes), and restarting
// every window would only add churn. Each such restart doubles the wait before the
// next one, up to BackoffMax; an hour of healthy observations ends the back-off.
func backoffGate(t *Target, p Pod, ps *state.Pod, s *state.State, now time.Time, cfg Config) (Gate, bool) {
	if cfg.IneffectiveWithin <= 0 {
		return Gate{}, false
	}
	if r := replacedBy(s, p, cfg.IneffectiveWithin); r != nil && ps.Bad.Since.Sub(p.StartedAt) <= cfg.IneffectiveWithin {
		b := s.Backoff
		if b == nil {
			b = &state.Backoff{}
			s.Backoff = b
		}
		b.Ineffective++
		wait := cfg.BackoffBase << min(max(b.Ineffective-1, 0), 16)
		if wait <= 0 || wait > cfg.BackoffMax {
			wait = cfg.BackoffMax
		}
		b.LastRestartAt, b.NotBefore, b.HealthySince = r.ClaimedAt, r.ClaimedAt.Add(wait), nil
		b.Reason = fmt.Sprintf("the %s of pod %s at %s did not heal the scheduler: its replacement %s started %s later and was %s again %s after it started; the cause is likely outside the scheduler (its RBAC for EndpointSlices, the network to the nodes)",
			r.Method, r.Pod, r.ClaimedAt.UTC().Format(time.RFC3339), p.Name, ShortDuration(p.StartedAt.Sub(r.ClaimedAt)), ps.Bad.Kind, ShortDuration(ps.Bad.Since.Sub(p.StartedAt)))
		r.Ineffective = b.Reason
		t.Ineffective = b.Reason
	}
	b := s.Backoff
	if b == nil || b.Ineffective == 0 {
		return Gate{}, false
	}
	if now.Before(b.NotBefore) {
		if t.Ineffective == "" {
			t.Ineffective = b.Reason
		}
		return Gate{Name: GateBackoff, Detail: fmt.Sprintf("%d restart(s) in a row did not heal; backing off: next restart not before %s", b.Ineffective, b.NotBefore.UTC().Format(time.RFC3339))}, true
	}
	return Gate{Name: GateBackoff, OK: true, Detail: fmt.Sprintf("%d restart(s) in a row did not heal; the back-off ended at %s", b.Ineffective, b.NotBefore.UTC().Format(time.RFC3339))}, true
}

// replacedBy returns the latest restart, done and not yet judged, that this pod's
// process replaces: another pod restarted at most within before this process
// started (a pod started days after a restart replaces nothing of it).
func replacedBy(s *state.State, p Pod, within time.Duration) *state.Restart {
	for i := len(s.Restarts) - 1; i >= 0; i-- {
		r := &s.Restarts[i]
		if r.Outcome != state.RestartDone || r.UID == p.UID {
			continue
		}
		// Pod timestamps have whole seconds: a replacement started in the second
		// of the claim counts as started after it.
		claimed := r.ClaimedAt.Truncate(time.Second)
		if r.Ineffective != "" || p.StartedAt.Before(claimed) || p.StartedAt.Sub(claimed) > within {
			return nil
		}
		return r
	}
	return nil
}

// endBackoffAfterHealthyHour ends the back-off once the scheduler stayed healthy for
// BackoffReset: the restarts that did not heal are then history.
func endBackoffAfterHealthyHour(s *state.State, now time.Time, cfg Config) {
	b := s.Backoff
	if b == nil {
		return
	}
	if b.HealthySince == nil {
		at := now
		b.HealthySince = &at
		return
	}
	if now.Sub(*b.HealthySince) >= cfg.BackoffReset {
		s.Backoff = nil
	}
}

// ownedBy reports whether a pod's controller is a ReplicaSet of the Deployment:
// ReplicaSets are named <deployment>-<pod-template-hash>, and the hash has no dash
// (so a pod of "agentenv-scheduler-canary" is not one of "agentenv-scheduler").
func ownedBy(p Pod, deployment string) bool {
	i := strings.LastIndexByte(p.ControllerName, '-')
	return p.ControllerKind == "ReplicaSet" && i > 0 && p.ControllerName[:i] == deployment
}

// chainVerified reports whether the pod's owner chain was checked by UID, for the
// controller reference the pod has now.
func chainVerified(p Pod, r *Rollout) bool {
	c := r.Owners[p.UID]
	return c.Verified && c.ReplicaSetUID == p.ControllerUID
}

// ownerChainDetail says which link of a pod's controller chain failed.
func ownerChainDetail(p Pod, r *Rollout) string {
	c, ok := r.Owners[p.UID]
	switch {
	case !ok || c.Detail == "":
		return fmt.Sprintf("owner chain of pod %s not verified by UID (ReplicaSet %s → Deployment %s not read); the rollout method needs it", p.Name, p.ControllerName, r.Name)
	case c.Verified:
		return fmt.Sprintf("owner chain not verified: pod %s now names ReplicaSet uid %q, the chain was checked for uid %q", p.Name, p.ControllerUID, c.ReplicaSetUID)
	}
	return "owner chain not verified: " + c.Detail
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// nextSlot is when the oldest restart inside the window leaves it.
func nextSlot(s *state.State, from time.Time, cfg Config) string {
	for _, r := range s.Restarts {
		if !r.ClaimedAt.Before(from) && r.Outcome != state.RestartAbandoned {
			return r.ClaimedAt.Add(cfg.RestartWindow).UTC().Format(time.RFC3339)
		}
	}
	return "now"
}

// summarize picks the run's verdict and action: the worst among judged pods.
func summarize(targets []Target, runProblem string) (Verdict, Action, string) {
	var worst *Target
	action := ActionNone
	for i := range targets {
		t := &targets[i]
		if !t.Judged {
			continue
		}
		if worst == nil || severity[t.Verdict] > severity[worst.Verdict] ||
			(severity[t.Verdict] == severity[worst.Verdict] && actionRank[t.Action] > actionRank[worst.Action]) {
			worst = t
		}
		if actionRank[t.Action] > actionRank[action] {
			action = t.Action
		}
	}
	if worst == nil {
		if runProblem == "" {
			runProblem = "no scheduler pod could be judged"
		}
		return VerdictUnknown, ActionNone, runProblem
	}
	reason := worst.Pod + ": " + worst.Reason
	if len(worst.Gates) > 0 {
		reason += "; " + GateSummary(*worst)
	}
	return worst.Verdict, action, reason
}

// GateSummary renders the gates the way a dry run shows them, for example
// "wedged 7m12s ≥ 4m; budget 1/3 used in the last 1h; → restart".
func GateSummary(t Target) string {
	var parts []string
	for _, g := range t.Gates {
		if g.Name == gateStartup || (g.OK && (g.Name == gateOnce || g.Name == gateSingle || g.Name == gateConsistent)) {
			continue
		}
		mark := ""
		if !g.OK {
			mark = "✗ "
		}
		parts = append(parts, mark+g.Detail)
	}
	return strings.Join(append(parts, "→ "+string(t.Action)), "; ")
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
