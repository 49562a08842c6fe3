package decide

import (
	"fmt"
	"maps"
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
	forgetGonePods(next, present, now)

	for _, p := range notJudged {
		if p.live {
			pauseClock(next, p.pod)
		}
		res.Targets = append(res.Targets, Target{Pod: p.pod.Name, UID: p.pod.UID, Verdict: "", Action: None, Reason: "not judged: " + p.why})
	}
	for _, p := range judged {
		t := judgePod(p, obs, next, cfg, len(judged))
		res.Targets = append(res.Targets, t)
	}
	sort.SliceStable(res.Targets, func(i, j int) bool {
		if res.Targets[i].Judged != res.Targets[j].Judged {
			return res.Targets[i].Judged
		}
		return res.Targets[i].Pod < res.Targets[j].Pod
	})

	res.Verdict, res.Action, res.Reason = summarize(res.Targets, runProblem)
	// A target that reached the rollout gate without the Deployment read was
	// blocked by it: read the Deployment and decide again.
	res.NeedRollout = obs.Rollout == nil && slices.ContainsFunc(res.Targets, func(t Target) bool {
		return slices.ContainsFunc(t.Gates, func(g Gate) bool { return g.Name == gateRollout })
	})
	return next, res
}

// CountRun updates the run-level counters once per run (Decide may be called several
// times in one run while a wedge is being confirmed).
func CountRun(s *state.State, verdict Verdict) {
	if verdict == Unknown {
		s.UnknownRuns++
	} else {
		s.UnknownRuns = 0
	}
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

// HolderIs reports whether a Lease holderIdentity names a pod. client-go's leader
// election commonly uses the pod name, or "<pod name>_<uuid>".
func HolderIs(holder, pod string) bool {
	return holder == pod || strings.HasPrefix(holder, pod+"_")
}

// forgetGonePods drops pods no longer listed, closing their episodes and settling
// restart claims: a claimed restart whose pod is gone did happen (the delete went
// through before the run that claimed it could record it).
func forgetGonePods(s *state.State, present map[string]bool, now time.Time) {
	for i := range s.Restarts {
		r := &s.Restarts[i]
		if r.Outcome == state.RestartClaimed && !present[r.UID] {
			r.Outcome = state.RestartDone
			r.DoneAt = &now
			r.Error = "the run that claimed this restart did not record it; the pod was gone when checked again"
		}
	}
	for _, uid := range slices.Sorted(maps.Keys(s.Pods)) {
		if present[uid] {
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
	t := Target{Pod: p.Name, UID: p.UID, Judged: true, Action: None}
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
	if !p.StartedAt.IsZero() {
		t.Age = now.Sub(p.StartedAt)
	}
	if p.Sample != nil && p.ScrapeErr == nil && verdict != Unknown {
		ready, expected := p.Sample.Ready(), obs.Expected.Serving
		t.Ready, t.Expected = &ready, &expected
		ps.Counters = &state.Counters{HeartbeatOK: p.Sample.HeartbeatOK, HeartbeatRejected: p.Sample.HeartbeatRejected, At: now}
	} else if obs.ExpectedErr == nil {
		expected := obs.Expected.Serving
		t.Expected = &expected
	}

	switch verdict {
	case Unknown:
		ps.Unknowns++
		if ps.Bad != nil {
			// Ready may have come back unseen: confirmation starts over.
			ps.Bad.StrongSince = nil
			ps.Bad.Evidence = string(Weak)
		}
	case Wedged, Degraded:
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
		advanceWedgeClock(ps, verdict, evidence, prevVerdict, baseline, now, t)
	default:
		ps.Unknowns = 0
		if ps.Bad != nil {
			endEpisode(s, p.UID, ps, now, "recovered")
		}
		// A claim left by a crashed run is moot once the pod is fine.
		if r := s.RestartFor(p.UID); r != nil && r.Outcome == state.RestartClaimed {
			r.Outcome = state.RestartAbandoned
			r.Error = fmt.Sprintf("pod %s was %s when checked again", p.Name, verdict)
		}
	}
	ps.LastVerdict = string(verdict)

	if ps.Bad != nil && (verdict == Wedged || verdict == Degraded) {
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
		return Unknown, why, "", false
	}
	if p.StartedAt.IsZero() {
		return Unknown, "no start time for the scheduler container or the pod", "", false
	}
	if p.StartedAt.After(now.Add(ClockSkewTolerance)) {
		return Unknown, fmt.Sprintf("container start %s is %s in the future: clock skew, the pod's age cannot be trusted",
			p.StartedAt.UTC().Format(time.RFC3339), ShortDuration(p.StartedAt.Sub(now))), "", false
	}
	age := now.Sub(p.StartedAt)
	if age < cfg.StartupGrace {
		return Starting, fmt.Sprintf("scheduler started %s ago, within the %s startup grace", ShortDuration(max(age, 0)), ShortDuration(cfg.StartupGrace)), "", false
	}
	if obs.ExpectedErr != nil {
		return Unknown, fmt.Sprintf("cannot count serving nodes: %v", obs.ExpectedErr), "", false
	}
	if p.ScrapeErr != nil {
		return Unknown, fmt.Sprintf("metrics unreadable: %v", p.ScrapeErr), "", false
	}
	if p.Sample == nil {
		return Unknown, "metrics not scraped", "", false
	}
	ready, expected := p.Sample.Ready(), obs.Expected.Serving

	evidence, evidenceWhy, noBaseline := weigh(p, ps, cfg)
	switch {
	case ready == 0 && expected == 0:
		return NoNodes, "the API server lists no serving node endpoints, so 0 ready is the truth", "", false
	case ready == 0:
		return Wedged, fmt.Sprintf("ready 0 while the API server lists %d serving node(s); %s", expected, evidenceWhy), evidence, noBaseline
	case ready < expected && (evidence == Strong || (prevVerdict == Degraded && ps.Bad != nil)):
		return Degraded, fmt.Sprintf("ready %d of %d serving node(s); %s", ready, expected, evidenceWhy), evidence, noBaseline
	case ready < expected:
		return Healthy, fmt.Sprintf("ready %d of %d serving node(s), no heartbeats rejected since last observation", ready, expected), "", false
	default:
		return Healthy, fmt.Sprintf("ready %d, %d serving node(s) listed", ready, expected), "", false
	}
}

// weigh compares the scrape with the previous observation of the same process.
func weigh(p Pod, ps *state.Pod, cfg Config) (Evidence, string, bool) {
	if cfg.MaxWatchAge > 0 && p.Sample.WatchAge != nil {
		if age := time.Duration(*p.Sample.WatchAge * float64(time.Second)); age > cfg.MaxWatchAge {
			return Strong, fmt.Sprintf("the discovery watch saw no event for %s (> --max-watch-age %s)", ShortDuration(age), ShortDuration(cfg.MaxWatchAge)), false
		}
	}
	cur := p.Sample.HeartbeatRejected
	if ps.Bad != nil && ps.Bad.BaselineRejected != nil && cur > *ps.Bad.BaselineRejected {
		return Strong, fmt.Sprintf("%d heartbeat(s) rejected since the episode began at %s: discovery does not know nodes that are calling in",
			cur-*ps.Bad.BaselineRejected, ps.Bad.Since.UTC().Format(time.RFC3339)), false
	}
	if ps.Counters == nil {
		return Weak, "no earlier counter value of this process to compare with", true
	}
	if cur > ps.Counters.HeartbeatRejected {
		return Strong, fmt.Sprintf("%d heartbeat(s) rejected since %s: discovery does not know nodes that are calling in",
			cur-ps.Counters.HeartbeatRejected, ps.Counters.At.UTC().Format(time.RFC3339)), false
	}
	return Weak, "no rejected heartbeats since the last observation: the nodes may not reach the scheduler", false
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
	ps.LastVerdict = string(Unknown)
	ps.Bad.StrongSince = nil
	ps.Bad.Evidence = string(Weak)
}

// advanceWedgeClock extends or starts the bad episode. The clock only advances
// between two consecutive observations with the same bad verdict; an unknown in
// between pauses it (that gap is not counted).
func advanceWedgeClock(ps *state.Pod, verdict Verdict, evidence Evidence, prevVerdict Verdict, baseline uint64, now time.Time, t Target) {
	if ps.Bad == nil || ps.Bad.Kind != string(verdict) {
		ps.Bad = &state.Bad{Kind: string(verdict), Since: now, Last: now, BaselineRejected: &baseline}
	} else {
		if prevVerdict == verdict && now.After(ps.Bad.Last) {
			ps.Bad.For += state.Duration(now.Sub(ps.Bad.Last))
		}
		ps.Bad.Last = now
	}
	if evidence == Strong && ps.Bad.StrongSince == nil {
		at := now
		ps.Bad.StrongSince = &at
	}
	if ps.Bad.StrongSince != nil {
		ps.Bad.Evidence = string(Strong)
	} else {
		ps.Bad.Evidence = string(Weak)
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
)

// decideAction runs the restart gates for a wedged or degraded pod.
func decideAction(t *Target, p Pod, obs Observation, s *state.State, ps *state.Pod, cfg Config, judgedCount int) {
	now := obs.At
	bad := ps.Bad
	t.Gates = append(t.Gates, Gate{Name: gateStartup, OK: true,
		Detail: fmt.Sprintf("started %s ago ≥ %s", ShortDuration(t.Age), ShortDuration(cfg.StartupGrace))})

	dueByDuration := bad.For.D() >= cfg.WedgedFor
	confirmedFor := time.Duration(0)
	if bad.StrongSince != nil {
		confirmedFor = now.Sub(*bad.StrongSince)
	}
	// The confirm-window path is for wedges only: a degraded scheduler still serves
	// some nodes, and is restarted (with --restart-on-degraded) after --wedged-for.
	fastPath := cfg.ConfirmWindow > 0 && bad.StrongSince != nil && bad.Kind == string(Wedged)
	dueByStrong := fastPath && confirmedFor >= cfg.ConfirmWindow
	switch {
	case dueByDuration:
		t.Gates = append(t.Gates, Gate{Name: gateDuration, OK: true, Detail: fmt.Sprintf("%s %s ≥ %s", bad.Kind, ShortDuration(bad.For.D()), ShortDuration(cfg.WedgedFor))})
	case dueByStrong:
		t.Gates = append(t.Gates, Gate{Name: gateDuration, OK: true, Detail: fmt.Sprintf("strong evidence held %s ≥ confirm window %s, ready never back", ShortDuration(confirmedFor), ShortDuration(cfg.ConfirmWindow))})
	default:
		detail := fmt.Sprintf("%s %s < %s", bad.Kind, ShortDuration(bad.For.D()), ShortDuration(cfg.WedgedFor))
		if fastPath {
			detail += fmt.Sprintf("; strong evidence held %s < confirm window %s", ShortDuration(confirmedFor), ShortDuration(cfg.ConfirmWindow))
			t.Confirming = true
		}
		t.Gates = append(t.Gates, Gate{Name: gateDuration, OK: false, Detail: detail})
		t.Action = Wait
		return
	}

	if bad.Kind == string(Degraded) && !cfg.RestartOnDegraded {
		t.Gates = append(t.Gates, Gate{Name: gateDegraded, OK: false, Detail: "degraded pods are alerted, not restarted (--restart-on-degraded=false)"})
		t.Action = None
		return
	}

	blocked := false
	gate := func(name string, ok bool, detail string) {
		t.Gates = append(t.Gates, Gate{Name: name, OK: ok, Detail: detail})
		if !ok {
			blocked = true
		}
	}

	if r := s.RestartFor(p.UID); r != nil {
		switch r.Outcome {
		case state.RestartDone:
			gate(gateOnce, false, fmt.Sprintf("already restarted at %s (%s); waiting for the replacement", r.ClaimedAt.UTC().Format(time.RFC3339), r.Method))
		case state.RestartClaimed:
			if r.ResumedAt != nil && now.Sub(*r.ResumedAt) < cfg.ClaimTimeout {
				gate(gateOnce, false, fmt.Sprintf("restart claimed at %s, taken over at %s by another run, which may still be acting", r.ClaimedAt.UTC().Format(time.RFC3339), r.ResumedAt.UTC().Format(time.RFC3339)))
				break
			}
			if now.Sub(r.ClaimedAt) < cfg.ClaimTimeout {
				gate(gateOnce, false, fmt.Sprintf("restart claimed at %s by another run, which may still be acting", r.ClaimedAt.UTC().Format(time.RFC3339)))
				break
			}
			t.Resume = true
			gate(gateOnce, true, fmt.Sprintf("restart claimed at %s by a run that did not finish it: completing that restart", r.ClaimedAt.UTC().Format(time.RFC3339)))
		default:
			gate(gateOnce, true, fmt.Sprintf("earlier attempt at %s %s", r.ClaimedAt.UTC().Format(time.RFC3339), r.Outcome))
		}
	} else {
		gate(gateOnce, true, "no restart yet for this pod")
	}

	if judgedCount > 1 {
		gate(gateSingle, false, fmt.Sprintf("%d scheduler pods are judged and no --leader-lease is set: cannot tell which is the leader", judgedCount))
	} else {
		gate(gateSingle, true, "one scheduler pod judged")
	}

	switch r := obs.Rollout; {
	case r == nil:
		gate(gateRollout, false, "Deployment not read yet")
	case r.Err != nil:
		gate(gateRollout, false, fmt.Sprintf("cannot read Deployment %s: %v", r.Name, r.Err))
	case !r.Found && cfg.RestartMethod == MethodRollout:
		gate(gateRollout, false, fmt.Sprintf("Deployment %s not found; the rollout method needs it", r.Name))
	case !r.Found:
		gate(gateRollout, true, fmt.Sprintf("Deployment %s not found; restarting the pod alone", r.Name))
	case r.Paused:
		gate(gateRollout, false, fmt.Sprintf("Deployment %s is paused", r.Name))
	case r.InProgress:
		gate(gateRollout, false, fmt.Sprintf("Deployment %s is mid-rollout: %s", r.Name, r.Detail))
	case cfg.RestartMethod == MethodRollout && !ownedBy(p, r.Name):
		// Rolling the Deployment would not replace this pod: the wedge would stay
		// and count as restarted.
		gate(gateRollout, false, fmt.Sprintf("pod %s is not run by Deployment %s (controller: %s %q); the rollout method would restart the wrong pods", p.Name, r.Name, orNone(p.ControllerKind), p.ControllerName))
	default:
		gate(gateRollout, true, fmt.Sprintf("Deployment %s is not rolling out", r.Name))
	}

	if !t.Resume {
		from := now.Add(-cfg.RestartWindow)
		used := s.RestartsSince(from)
		if used >= cfg.MaxRestarts {
			gate(gateBudget, false, fmt.Sprintf("budget %d/%d used in the last %s; next slot %s", used, cfg.MaxRestarts, ShortDuration(cfg.RestartWindow), nextSlot(s, from, cfg)))
		} else {
			gate(gateBudget, true, fmt.Sprintf("budget %d/%d used in the last %s", used, cfg.MaxRestarts, ShortDuration(cfg.RestartWindow)))
		}
	}

	if blocked {
		t.Action = Blocked
		return
	}
	t.Action = Restart
}

// ownedBy reports whether a pod's controller is a ReplicaSet of the Deployment:
// ReplicaSets are named <deployment>-<pod-template-hash>, and the hash has no dash
// (so a pod of "agentenv-scheduler-canary" is not one of "agentenv-scheduler").
func ownedBy(p Pod, deployment string) bool {
	i := strings.LastIndexByte(p.ControllerName, '-')
	return p.ControllerKind == "ReplicaSet" && i > 0 && p.ControllerName[:i] == deployment
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
	action := None
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
		return Unknown, None, runProblem
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
		if g.Name == gateStartup || (g.OK && (g.Name == gateOnce || g.Name == gateSingle)) {
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
