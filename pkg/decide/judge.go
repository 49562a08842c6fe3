package decide

import (
	"cmp"
	"fmt"
	"time"

	"github.com/agentenv/watchdog/pkg/scrape"
	"github.com/agentenv/watchdog/pkg/state"
)

// judgedPod is one pod a Decide call judges: what judging reads, what it updates (the
// state, the pod's record for the process observed) and what that record said before.
// The gates only read it.
type judgedPod struct {
	Pod
	obs          Observation
	cfg          Config
	state        *state.State
	now          time.Time
	judged       int // pods judged this run
	rec          *state.Pod
	prevVerdict  state.Verdict
	prevCounters *state.Counters
	takeOver     bool // completing a restart an earlier run claimed and did not finish
	probe        probeFinding
}

// judge decides the pod and updates its record: process, verdict, clock, back-off, gates.
func (p *judgedPod) judge() (t Target) {
	p.freshRecord()
	p.noteProbe()
	defer func() {
		if t.Probe = p.probe.note; p.probe.pending && (t.SampleFor == nil || *t.SampleFor > 0) {
			t.SampleFor = new(time.Duration) // one more sample: the canary may show
		}
	}()
	t, failed := p.verdict()
	t.Pod, t.UID, t.Judged, t.Action = p.Name, p.UID, true, state.ActionNone
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
	if t.NodesUnreachable { // a restart does not help: no wedged-for, no restart
		t.Gates = []Gate{{Name: gateProbe, Detail: "discovery knows every serving node: a restart does not help nodes that cannot reach the scheduler"}}
		return t
	}
	// A claim, and its take-over if any, older than ClaimTimeout: its run is no longer acting.
	r := RestartOf(p.state, p.UID, p.now)
	p.takeOver = r != nil && r.Outcome == state.RestartClaimed && p.now.Sub(latestDate(*r)) >= p.cfg.ClaimTimeout
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

// verdict judges the observation into a target's verdict, reason, evidence, age and
// doubts, and reports a failed sample: unknown for a failed read, not for the pod.
func (p *judgedPod) verdict() (t Target, failed bool) {
	now, cfg := p.now, p.cfg
	if !p.Running {
		why := "scheduler container is not running"
		if p.WaitingReason != "" {
			why += " (" + p.WaitingReason + ")"
		}
		return Target{Verdict: state.VerdictUnknown, Reason: why}, false
	}
	if p.StartedAt.IsZero() {
		return Target{Verdict: state.VerdictUnknown, Reason: "no start time for the scheduler container or the pod"}, false
	}
	age, skew := now.Sub(p.StartedAt), ""
	if p.StartedAt.After(now.Add(ClockSkewTolerance)) {
		// The node's clock runs ahead: the process is as old as the watchdog watched it.
		ahead := fmt.Sprintf("container start %s is %s in the future: clock skew, the node's clock runs ahead", p.StartedAt.UTC().Format(time.RFC3339), ShortDuration(p.StartedAt.Sub(now)))
		watched := now.Sub(p.rec.FirstSeen)
		if p.rec.FirstSeen.IsZero() || watched < cfg.StartupGrace {
			return Target{Verdict: state.VerdictUnknown, Reason: fmt.Sprintf("%s; judged once the watchdog has watched it for --startup-grace %s by its own clock", ahead, ShortDuration(cfg.StartupGrace))}, false
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
		return Target{Verdict: state.VerdictStarting, Reason: fmt.Sprintf("scheduler started %s ago, within the %s startup grace", ShortDuration(max(age, 0)), ShortDuration(p.cfg.StartupGrace))}, false
	}
	if p.obs.ExpectedErr != nil {
		return Target{Verdict: state.VerdictUnknown, Reason: fmt.Sprintf("cannot count serving nodes: %v", p.obs.ExpectedErr)}, true
	}
	if p.ScrapeErr != nil {
		return Target{Verdict: state.VerdictUnknown, Reason: fmt.Sprintf("metrics unreadable: %v", p.ScrapeErr)}, true
	}
	if p.Sample == nil {
		return Target{Verdict: state.VerdictUnknown, Reason: "metrics not scraped"}, true
	}
	ready, expected := p.Sample.Ready(), p.obs.Expected.Serving
	if e := p.rec.Episode; p.probe.unknown && e != nil && e.Kind == state.VerdictWedged && e.Ready > 0 {
		// Only the probe saw this wedge: a sample it cannot read is a gap.
		return Target{Verdict: state.VerdictUnknown, Reason: "the discovery probe failed: " + p.probe.note}, true
	}
	var t Target
	if ready > expected {
		t.Warnings = append(t.Warnings, fmt.Sprintf("the scheduler counts %d ready node(s) but the API server lists only %d serving: check --nodes-service and --nodes-port, or the count is stale", ready, expected))
	}
	evidence, evidenceWhy, noEarlierCounters := weigh(p.Pod, p.rec, p.cfg)
	switch {
	case ready == 0 && expected == 0:
		t.Verdict, t.Reason = state.VerdictNoNodes, "the API server lists no serving node endpoints, so 0 ready is the truth"
	case ready == 0 && p.probe.dead != "":
		t.Verdict, t.Reason, t.Evidence = state.VerdictWedged, fmt.Sprintf("ready 0 while the API server lists %d serving node(s); %s", expected, p.probe.dead), state.EvidenceStrong
	case ready == 0:
		t.Verdict, t.Reason = state.VerdictWedged, fmt.Sprintf("ready 0 while the API server lists %d serving node(s); %s", expected, evidenceWhy)
		t.Evidence, t.NoEarlierCounters = evidence, noEarlierCounters
		if evidence == state.EvidenceWeak && p.probe.knowsAll {
			t.Reason, t.NodesUnreachable = fmt.Sprintf("ready 0 while the API server lists %d serving node(s); the scheduler knows all %d but none reports: the nodes cannot reach it", expected, expected), true
		}
	case p.probe.dead != "" && expected > 0:
		t.Verdict, t.Reason, t.Evidence = state.VerdictWedged, fmt.Sprintf("ready %d of %d serving node(s), but discovery is dead: %s", ready, expected, p.probe.dead), state.EvidenceStrong
	case ready < expected && (evidence == state.EvidenceStrong || (p.prevVerdict == state.VerdictDegraded && p.rec.Episode != nil)):
		t.Verdict, t.Reason = state.VerdictDegraded, fmt.Sprintf("ready %d of %d serving node(s); %s", ready, expected, evidenceWhy)
		t.Evidence, t.NoEarlierCounters = evidence, noEarlierCounters
	case ready < expected:
		t.Verdict, t.Reason = state.VerdictHealthy, fmt.Sprintf("ready %d of %d serving node(s), no heartbeats rejected since last observation", ready, expected)
	default:
		t.Verdict, t.Reason = state.VerdictHealthy, fmt.Sprintf("ready %d, %d serving node(s) listed", ready, expected)
	}
	return t, false
}

// abandonClaim settles a claim left by a crashed run on a pod that is fine: moot.
func (p *judgedPod) abandonClaim(verdict state.Verdict) {
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
