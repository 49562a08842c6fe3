package decide

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/utils/ptr"

	"github.com/agentenv/watchdog/pkg/state"
)

// Gate names.
const (
	gateStartup    = "startup-grace"
	gateDuration   = "wedged-for"
	gateOnce       = "once-per-wedge"
	gateSingle     = "single-target"
	gateRollout    = "rollout"
	gateBudget     = "budget"
	gateDegraded   = "restart-on-degraded"
	gateConsistent = "consistent-read"
	gateProbe      = "discovery-probe"
	// GateBackoff holds restarts back after restarts that did not heal.
	GateBackoff = "backoff"
	// GateAlerts holds a due restart while alerts matching --hold-restarts-on-alert fire.
	GateAlerts = "firing-alerts"
)

// restartGate is one gate of the table below. check answers whether a due restart may
// go ahead, with a Gate without a name when it has nothing to say.
type restartGate struct {
	name       string
	newOnly    bool // skipped when completing an unfinished restart: not a new one
	last       bool // runs only when every other gate agreed: it costs a read
	check      func(p *judgedPod) Gate
	readFailed func(obs Observation) bool // refused for a failed read: sample on to read again
}

// restartGates are the gates a due restart passes, in order (docs/design.md §2,
// "Gates"); every one runs, so the report shows each refusal. The order is that of
// the reads they need (askReads): a restart the Deployment holds costs no other read.
var restartGates = []restartGate{
	{name: gateOnce, check: onceGate},
	{name: gateSingle, check: singleGate},
	{name: gateRollout, check: rolloutGate,
		readFailed: func(o Observation) bool { return o.Rollout != nil && o.Rollout.Err != nil }},
	{name: GatePaused, check: pauseGate},
	{name: GateBackoff, newOnly: true, check: backoffGate},
	{name: gateBudget, newOnly: true, check: budgetGate},
	{name: GateAlerts, last: true, check: alertsGate},
	{name: gateConsistent, last: true, check: consistentGate,
		readFailed: func(o Observation) bool { return o.ConsistentErr != nil }},
}

// askReads asks the caller for each read a gate refused a due restart for want of.
func askReads(res *Result, obs Observation) {
	refused := func(gate string) bool {
		return slices.ContainsFunc(res.Targets, func(t Target) bool {
			return slices.ContainsFunc(t.Gates, func(g Gate) bool { return g.Name == gate && !g.OK })
		})
	}
	res.NeedRollout = obs.Rollout == nil && refused(gateRollout)
	res.NeedAlerts = obs.Alerts == nil && refused(GateAlerts)
	res.NeedConsistentRead = !obs.Consistent && obs.ConsistentErr == nil && refused(gateConsistent)
}

// restartDue adds the gates that say whether a restart of a bad pod is due at all
// (startup grace, wedged-for, restart-on-degraded), and reports whether it is.
func (p *judgedPod) restartDue(t *Target) bool {
	cfg, e := p.cfg, p.rec.Episode
	t.Gates = append(t.Gates, Gate{Name: gateStartup, OK: true,
		Detail: fmt.Sprintf("started %s ago ≥ %s", ShortDuration(t.Age), ShortDuration(cfg.StartupGrace))})
	g, sampleFor, confirming := dueGate(e, p.now, cfg)
	t.Gates, t.SampleFor, t.Confirming = append(t.Gates, g), sampleFor, confirming
	if !g.OK {
		t.Action = state.ActionWait
		return false
	}
	if e.Kind == state.VerdictDegraded && !cfg.RestartOnDegraded {
		t.Gates = append(t.Gates, Gate{Name: gateDegraded, OK: false, Detail: "degraded pods are alerted, not restarted (--restart-on-degraded=false)"})
		t.Action = state.ActionNone
		return false
	}
	return true
}

// runGates runs the restart gates over a due restart: restart when all agree, else blocked.
func (p *judgedPod) runGates(t *Target) {
	blocked, readFailed := false, true
	for _, rg := range restartGates {
		if (rg.newOnly && p.takeOver) || (rg.last && blocked) {
			continue
		}
		g := rg.check(p)
		if g.Name == "" {
			continue
		}
		t.Gates = append(t.Gates, g)
		if !g.OK {
			blocked = true
			readFailed = readFailed && rg.readFailed != nil && rg.readFailed(p.obs)
		}
		if g.Name == GateBackoff && !g.OK && t.Ineffective == "" {
			t.Ineffective = p.state.Backoff.Why()
		}
	}
	t.TakeOverClaim = p.takeOver
	if !blocked {
		t.Action = state.ActionRestart
		return
	}
	t.Action = state.ActionBlocked
	if slices.ContainsFunc(t.Gates, func(g Gate) bool { return g.Name == gateOnce && g.InProgress }) {
		// While a restart of this pod is already done or under way, the other
		// refusals are its consequences (its own rollout, the budget it just used).
		for i := range t.Gates {
			t.Gates[i].InProgress = t.Gates[i].InProgress || !t.Gates[i].OK
		}
	}
	if readFailed {
		t.SampleFor = new(time.Duration)
	}
}

// dueGate is the wedged-for gate on episode e, OK when a restart is due (docs/design.md
// §2, "Confirmation"); when not, how long sampling on is worth it, and whether strong
// evidence is confirming.
func dueGate(e *state.OpenEpisode, now time.Time, cfg Config) (gate Gate, sampleFor *time.Duration, confirming bool) {
	inRun := now.Sub(ptr.Deref(e.RunSince, now))
	// A degraded pod never restarted needs no in-run confirmation: only an alert waits.
	confirmedInRun := cfg.ConfirmWindow <= 0 || inRun >= cfg.ConfirmWindow ||
		(e.Kind == state.VerdictDegraded && !cfg.RestartOnDegraded)
	// Strong evidence counts from its first sight in this run at the earliest: a
	// run cut short leaves the next to confirm again, never to restart at once.
	strongFor := time.Duration(0)
	if e.StrongSince != nil {
		strongFor = min(now.Sub(*e.StrongSince), inRun)
	}
	// For wedges only: a degraded scheduler still serves some nodes.
	fastPath := cfg.ConfirmWindow > 0 && e.StrongSince != nil && e.Kind == state.VerdictWedged
	ready := map[bool]string{true: "ready 0", false: "discovery dead"}[e.Ready == 0]
	if e.Kind == state.VerdictDegraded {
		ready = "ready below the serving nodes"
	}
	inRunDetail := fmt.Sprintf("%s throughout %s of this run's samples", ready, ShortDuration(inRun))
	ok := func(detail string) (Gate, *time.Duration, bool) {
		return Gate{Name: gateDuration, OK: true, Detail: detail}, nil, false
	}
	switch {
	case e.For.D() >= cfg.WedgedFor && confirmedInRun:
		return ok(fmt.Sprintf("%s %s ≥ %s, %s", e.Kind, ShortDuration(e.For.D()), ShortDuration(cfg.WedgedFor), inRunDetail))
	case fastPath && strongFor >= cfg.ConfirmWindow:
		return ok(fmt.Sprintf("strong evidence held %s ≥ confirm window %s, never cleared", ShortDuration(strongFor), ShortDuration(cfg.ConfirmWindow)))
	case cfg.ConfirmWindow > 0 && e.ConfirmedRuns >= 2 && confirmedInRun:
		return ok(fmt.Sprintf("confirmed in %d runs separated only by runs that could not see the scheduler; %s", e.ConfirmedRuns, inRunDetail))
	}

	detail := fmt.Sprintf("%s %s < %s", e.Kind, ShortDuration(e.For.D()), ShortDuration(cfg.WedgedFor))
	if e.For.D() >= cfg.WedgedFor {
		detail = fmt.Sprintf("%s %s ≥ %s, confirming in this run: %s < confirm window %s", e.Kind, ShortDuration(e.For.D()), ShortDuration(cfg.WedgedFor), inRunDetail, ShortDuration(cfg.ConfirmWindow))
	}
	var due []time.Duration
	if fastPath {
		detail += fmt.Sprintf("; strong evidence held %s < confirm window %s", ShortDuration(strongFor), ShortDuration(cfg.ConfirmWindow))
		due = append(due, cfg.ConfirmWindow-strongFor)
	}
	if e.Kind == state.VerdictWedged || cfg.RestartOnDegraded {
		due = append(due, max(cfg.WedgedFor-e.For.D(), cfg.ConfirmWindow-inRun))
		if cfg.ConfirmWindow > 0 && inRun < cfg.ConfirmWindow {
			// Confirmed in-run, it can chain with a later run across unknown ones.
			due = append(due, cfg.ConfirmWindow-inRun)
		}
	}
	if len(due) > 0 {
		sampleFor = new(max(slices.Min(due), 0))
	}
	return Gate{Name: gateDuration, Detail: detail}, sampleFor, fastPath
}

// FiringAlerts is what Alertmanager said, read just before a restart: the first five
// matching alerts as alertname{labels}, and how many match within what is read.
type FiringAlerts struct {
	Matchers string
	Firing   []string
	Count    int
	Err      error
}

// alertsGate refuses while a matching alert fires. Alertmanager unreachable lets
// the restart through (docs/design.md, "Holding restarts while alerts fire"):
// the wedge is certain, the outage behind the alerts only suspected.
func alertsGate(p *judgedPod) Gate {
	if !p.obs.HoldOnAlerts {
		return Gate{}
	}
	a := p.obs.Alerts
	switch {
	case a == nil:
		return Gate{Name: GateAlerts, InProgress: true, Detail: "firing alerts not read yet: reading Alertmanager"}
	case a.Err != nil:
		return Gate{Name: GateAlerts, OK: true, Detail: fmt.Sprintf("cannot read the firing alerts (%v): restart allowed, the hold fails open", a.Err)}
	case len(a.Firing) > 0:
		// A few named, the rest counted: the detail is in every reason, report and alert.
		var named []string
		for _, f := range a.Firing[:min(len(a.Firing), 5)] {
			named = append(named, state.Truncate(f, 200))
		}
		if more := max(a.Count, len(a.Firing)) - len(named); more > 0 {
			named = append(named, fmt.Sprintf("%d more", more))
		}
		return Gate{Name: GateAlerts, Detail: fmt.Sprintf("held while alerts fire: %s (matching %s); a restart cannot help while they do", strings.Join(named, ", "), a.Matchers)}
	}
	return Gate{Name: GateAlerts, OK: true, Detail: fmt.Sprintf("no alert matching %s is firing", a.Matchers)}
}

// onceGate refuses a second restart of one pod; one done or under way is in progress
// until its replacement had its startup grace and a confirm window to take over.
func onceGate(p *judgedPod) Gate {
	now, cfg := p.now, p.cfg
	r := RestartOf(p.state, p.UID, now)
	if r == nil { // records dated ahead are told once, in datedAheadWarnings
		return Gate{Name: gateOnce, OK: true, Detail: "no restart yet for this pod"}
	}
	claimed := r.ClaimedAt.UTC().Format(time.RFC3339)
	switch {
	case r.Outcome == state.RestartDone:
		done := *cmp.Or(r.DoneAt, &r.ClaimedAt)
		if grace := cfg.StartupGrace + cfg.ConfirmWindow; now.Sub(done) < grace {
			return Gate{Name: gateOnce, InProgress: true, Detail: fmt.Sprintf("restart already in progress: %s at %s; the replacement has until %s to take over",
				r.Method, done.UTC().Format(time.RFC3339), done.Add(grace).UTC().Format(time.RFC3339))}
		}
		return Gate{Name: gateOnce, Detail: fmt.Sprintf("already restarted at %s (%s), and this pod is still running and bad %s later: the restart did not replace it",
			claimed, r.Method, ShortDuration(now.Sub(done)))}
	case p.takeOver:
		return Gate{Name: gateOnce, OK: true, Detail: fmt.Sprintf("restart claimed at %s by a run that did not finish it: completing that restart", claimed)}
	case r.Outcome == state.RestartClaimed && r.ResumedAt != nil && now.Sub(*r.ResumedAt) < cfg.ClaimTimeout:
		return Gate{Name: gateOnce, InProgress: true, Detail: fmt.Sprintf("restart already in progress: claimed at %s, taken over at %s by another run, which may still be acting", claimed, r.ResumedAt.UTC().Format(time.RFC3339))}
	case r.Outcome == state.RestartClaimed:
		return Gate{Name: gateOnce, InProgress: true, Detail: fmt.Sprintf("restart already in progress: claimed at %s by another run, which may still be acting", claimed)}
	default:
		return Gate{Name: gateOnce, OK: true, Detail: fmt.Sprintf("earlier attempt at %s %s", claimed, r.Outcome)}
	}
}

func singleGate(p *judgedPod) Gate {
	if p.judged > 1 {
		return Gate{Name: gateSingle, Detail: fmt.Sprintf("%d scheduler pods are judged and no --leader-lease is set: cannot tell which is the leader", p.judged)}
	}
	return Gate{Name: gateSingle, OK: true, Detail: "one scheduler pod judged"}
}

// consistentGate lets a restart through only on lists read with a consistent read.
func consistentGate(p *judgedPod) Gate {
	switch {
	case p.obs.Consistent:
		return Gate{Name: gateConsistent, OK: true, Detail: "pods and EndpointSlices re-read with a consistent read"}
	case p.obs.ConsistentErr != nil:
		return Gate{Name: gateConsistent, Detail: fmt.Sprintf("cannot re-read the pods and EndpointSlices with a consistent read: %v", p.obs.ConsistentErr)}
	default:
		return Gate{Name: gateConsistent, InProgress: true, Detail: "pods and EndpointSlices were read from the API server's watch cache: re-reading them with a consistent read"}
	}
}

func rolloutGate(p *judgedPod) Gate {
	r, cfg := p.obs.Rollout, p.cfg
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
	case cfg.RestartMethod == MethodRollout && !OwnedByName(p.Pod, r.Name):
		// Rolling the Deployment would not replace this pod.
		g.Detail = fmt.Sprintf("pod %s is not run by Deployment %s (controller: %s %q); the rollout method would restart the wrong pods", p.Name, r.Name, cmp.Or(p.ControllerKind, "none"), p.ControllerName)
	case cfg.RestartMethod == MethodRollout && !r.Owners[p.UID].verifies(p.Pod):
		// Names can be forged: only the chain read by UID says this pod is replaced.
		g.Detail = ownerChainDetail(p.Pod, r)
	default:
		g.OK, g.Detail = true, fmt.Sprintf("Deployment %s is not rolling out", r.Name)
	}
	return g
}

// budgetGate counts the claims of the last --restart-window, not those dated ahead
// nor abandoned ones.
func budgetGate(p *judgedPod) Gate {
	cfg := p.cfg
	from, to := p.now.Add(-cfg.RestartWindow), p.now.Add(ClockSkewTolerance)
	var used []state.Restart // oldest first, as the state keeps them
	ahead := 0
	for _, r := range p.state.Restarts {
		switch {
		case r.Outcome == state.RestartAbandoned:
		case r.ClaimedAt.After(to):
			ahead++
		case !r.ClaimedAt.Before(from):
			used = append(used, r)
		}
	}
	g := Gate{Name: gateBudget, OK: len(used) < cfg.MaxRestarts,
		Detail: fmt.Sprintf("budget %d/%d used in the last %s", len(used), cfg.MaxRestarts, ShortDuration(cfg.RestartWindow))}
	if ahead > 0 {
		g.Detail += fmt.Sprintf(" (%d dated in the future not counted)", ahead)
	}
	if next := "now"; !g.OK {
		if len(used) > 0 {
			next = used[0].ClaimedAt.Add(cfg.RestartWindow).UTC().Format(time.RFC3339)
		}
		g.Detail += "; next slot " + next
	}
	return g
}

// latestDate is the latest time a restart record names.
func latestDate(r state.Restart) time.Time {
	dates := []time.Time{r.ClaimedAt, ptr.Deref(r.DoneAt, r.ClaimedAt), ptr.Deref(r.ResumedAt, r.ClaimedAt)}
	return slices.MaxFunc(dates, time.Time.Compare)
}

// datedAhead reports a restart record dated beyond ClockSkewTolerance ahead: it counts
// for nothing until then (docs/design.md, "Records dated in the future").
func datedAhead(r state.Restart, now time.Time) bool {
	return latestDate(r).After(now.Add(ClockSkewTolerance))
}

// RestartOf returns the latest restart record of the pod that counts now, passing
// over those dated ahead (which saving the state sorts last).
func RestartOf(s *state.State, uid string, now time.Time) *state.Restart {
	for i := len(s.Restarts) - 1; i >= 0; i-- {
		if r := &s.Restarts[i]; r.UID == uid && !datedAhead(*r, now) {
			return r
		}
	}
	return nil
}

// backoffAhead reports a back-off ending further ahead than --restart-backoff-max
// (and ClockSkewTolerance) can set it: a record dated ahead, or an edit, did.
func backoffAhead(b *state.Backoff, now time.Time, cfg Config) bool {
	return b != nil && cfg.BackoffMax > 0 && b.NotBefore.After(now.Add(cfg.BackoffMax+ClockSkewTolerance))
}

// datedAheadWarnings names times only: the records may be anyone's text.
func datedAheadWarnings(s *state.State, now time.Time, cfg Config) []string {
	var out []string
	if cfg.IneffectiveWithin > 0 && backoffAhead(s.Backoff, now, cfg) {
		out = append(out, fmt.Sprintf("the restart back-off in the state ends at %s, %s from now, further ahead than --restart-backoff-max %s allows: ignored. A run on a node whose clock ran ahead wrote it, or someone edited the state ConfigMap",
			s.Backoff.NotBefore.UTC().Format(time.RFC3339), ShortDuration(s.Backoff.NotBefore.Sub(now)), ShortDuration(cfg.BackoffMax)))
	}
	future := slices.DeleteFunc(slices.Clone(s.Restarts), func(r state.Restart) bool {
		return !datedAhead(r, now) || r.Outcome == state.RestartAbandoned
	})
	if len(future) == 0 {
		return out
	}
	latest := latestDate(slices.MaxFunc(future, func(a, b state.Restart) int { return latestDate(a).Compare(latestDate(b)) }))
	return append(out, fmt.Sprintf("%d restart record(s) in the state are dated in the future, up to %s (%s ahead of this watchdog's clock, tolerance %s): until their date comes they are not counted in the restart budget, nor as a restart done or in progress for their pod. A run on a node whose clock ran ahead wrote them, or someone edited the state ConfigMap",
		len(future), latest.UTC().Format(time.RFC3339), ShortDuration(latest.Sub(now)), ShortDuration(ClockSkewTolerance)))
}

// backoffGate holds a restart back before the back-off's NotBefore.
func backoffGate(p *judgedPod) Gate {
	b := p.state.Backoff
	if p.cfg.IneffectiveWithin <= 0 || b == nil || b.Ineffective == 0 {
		return Gate{}
	}
	if backoffAhead(b, p.now, p.cfg) {
		return Gate{Name: GateBackoff, OK: true, Detail: fmt.Sprintf("%d restart(s) in a row did not heal, but the back-off's end %s is further ahead than --restart-backoff-max allows: ignored", b.Ineffective, b.NotBefore.UTC().Format(time.RFC3339))}
	}
	if p.now.Before(b.NotBefore) {
		return Gate{Name: GateBackoff, Detail: fmt.Sprintf("%d restart(s) in a row did not heal; backing off: next restart not before %s", b.Ineffective, b.NotBefore.UTC().Format(time.RFC3339))}
	}
	return Gate{Name: GateBackoff, OK: true, Detail: fmt.Sprintf("%d restart(s) in a row did not heal; the back-off ended at %s", b.Ineffective, b.NotBefore.UTC().Format(time.RFC3339))}
}

// OwnedByName reports whether a pod's controller is a ReplicaSet of the Deployment,
// named <deployment>-<pod-template-hash>: the hash has no dash.
func OwnedByName(p Pod, deployment string) bool {
	i := strings.LastIndexByte(p.ControllerName, '-')
	return p.ControllerKind == "ReplicaSet" && i > 0 && p.ControllerName[:i] == deployment
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

// GateSummary renders the gates the way a dry run shows them, for example
// "wedged 7m12s ≥ 4m; budget 1/3 used in the last 1h; → restart".
func GateSummary(t Target) string {
	var parts []string
	for _, g := range t.Gates {
		if g.Name == gateStartup || (g.OK && (g.Name == gateOnce || g.Name == gateSingle || g.Name == gateConsistent)) {
			continue
		}
		parts = append(parts, map[bool]string{false: "✗ "}[g.OK]+g.Detail)
	}
	return strings.Join(append(parts, "→ "+string(t.Action)), "; ")
}
