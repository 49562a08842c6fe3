// Package check runs one watchdog pass: observe, decide (confirming a strong-evidence
// wedge by sampling again), claim, act, alert, persist. The same pass serves the
// one-shot `watchdog check` and the loop of `watchdog run`.
package check

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/events"
	"github.com/agentenv/watchdog/pkg/restart"
	"github.com/agentenv/watchdog/pkg/state"
	"github.com/agentenv/watchdog/pkg/statestore"
)

// Options configure a pass.
type Options struct {
	Decide decide.Config
	Plan   alert.PlanConfig
	DryRun bool
	// SampleInterval is the pause between samples while confirming (the scheduler
	// refreshes its gauges every 15 s, so sampling faster shows nothing new).
	SampleInterval time.Duration
	Namespace      string
	StateConfigMap string
	Version        string
}

// Runner holds a pass's collaborators.
type Runner struct {
	Options
	Observer  Observer
	Store     Store
	Restarter restart.Restarter
	// Events, when not nil, records alerts and restarts as Kubernetes Events.
	Events EventRecorder
	// Sinks are where alerts go besides logs and Events.
	Sinks []alert.Sink
	Clock clock.Clock
	Log   zerolog.Logger
}

// Error is a pass that could not do its job; the CLI exits 1 on it.
type Error struct {
	What string
	Err  error
}

func (e *Error) Error() string { return e.What + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// ErrInterrupted is a pass cut short by its own shutdown (SIGTERM from a `helm
// upgrade` or a node drain, or leadership lost in `watchdog run`): not a failure of
// the watchdog, so it alerts nobody and pings no /fail.
var ErrInterrupted = errors.New("pass cut short by shutdown")

// shutdownGrace bounds what an interrupted pass still does: write its state.
const shutdownGrace = 5 * time.Second

// interrupted reports whether the pass's context was cancelled (a shutdown), as
// opposed to running out of time (a failure) or still going.
func interrupted(ctx context.Context) bool {
	return errors.Is(ctx.Err(), context.Canceled)
}

// reserve is kept back from the run deadline for acting and persisting: a sixth
// of the run, at most 10 s (30 s of a 3 min run would be wasted waiting).
func reserve(start, deadline time.Time) time.Duration {
	return min(10*time.Second, deadline.Sub(start)/6)
}

// claimBackoff spaces retries after losing a claim race; the API server's
// conflict says someone else wrote, so re-reading right away is usually enough.
var claimBackoff = wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 4}

// Run performs one pass. The report is filled as far as the pass got, also on error.
func (r *Runner) Run(ctx context.Context) (*Report, error) {
	start := r.Clock.Now()
	rep := &Report{Time: start.UTC(), DryRun: r.DryRun, Namespace: r.Namespace, Cluster: r.Plan.Cluster,
		Verdict: decide.VerdictUnknown, Action: decide.ActionNone}
	defer func() { rep.Took = r.Clock.Since(start).Round(time.Millisecond).String() }()

	// State and observation are independent reads: take them together.
	var (
		snap    *statestore.Snapshot
		loadErr error
		loaded  = make(chan struct{})
	)
	go func() {
		defer close(loaded)
		snap, loadErr = r.Store.Load(ctx)
	}()
	obs, err := r.observe(ctx, start, false)
	<-loaded
	if loadErr != nil {
		rep.Reason = "cannot read state"
		if interrupted(ctx) {
			return rep, r.interrupt(rep, loadErr)
		}
		failure := &Error{What: "read state", Err: loadErr}
		r.alertFailure(ctx, state.New(), failure, rep)
		return rep, failure
	}
	if snap.Recovered != "" {
		r.Log.Warn().Str("configmap", r.StateConfigMap).Str("detail", snap.Recovered).Msg("starting with empty state")
		rep.Warnings = append(rep.Warnings, snap.Recovered)
	}
	if err != nil {
		rep.Reason = "cannot list scheduler pods"
		return rep, r.failRun(ctx, snap, rep, &Error{What: "observe", Err: err})
	}
	rep.Samples = 1
	next, res := r.decide(ctx, &obs, snap.State, rep)
	next, res = r.confirm(ctx, start, &obs, next, res, rep)
	decide.CountRun(next, res.Verdict)
	if interrupted(ctx) {
		// Keep what was observed (the episode's clock), act on nothing, tell nobody.
		rep.fill(res)
		return rep, r.saveInterrupted(ctx, snap, next, start, res, rep, errors.New("shutdown while observing"))
	}

	p := &pass{snap: snap, obs: &obs, next: next, res: res, rep: rep}
	acts, err := r.act(ctx, p)
	next, res = p.next, p.res
	rep.fill(res)
	for _, w := range res.Warnings {
		r.Log.Warn().Str("detail", w).Msg("run warning")
		rep.Warnings = append(rep.Warnings, w)
	}
	if err != nil {
		return rep, err
	}
	r.logDecision(res, rep)
	if interrupted(ctx) {
		// Shut down while restarting: the outcomes are in next; alerts are not sent.
		return rep, r.saveInterrupted(ctx, snap, next, start, res, rep, errors.New("shutdown while acting"))
	}

	// API reads that failed made the verdict unknown; they also mean the watchdog
	// cannot do its job (often missing RBAC), which exit code 1 makes visible.
	runErr := observationError(obs)
	notes := alert.Plan(next, res, acts, runErr, r.Clock.Now(), r.Plan)
	d := r.dispatcher()
	if deadline, ok := ctx.Deadline(); ok {
		d.SendBy = deadline.Add(-reserve(start, deadline)) // keep time to persist the outcome and the outbox
	}
	rep.Alerts = d.Deliver(ctx, next, notes, r.Clock.Now(), r.DryRun)
	rep.Alerts = append(rep.Alerts, d.Refresh(ctx, next, r.Clock.Now(), r.DryRun)...) // keep open alerts alive (Alertmanager)
	r.logDeliveries(rep.Alerts)
	for _, a := range acts {
		if a.Err != nil && runErr == nil {
			runErr = &Error{What: "restart", Err: a.Err}
		}
	}
	next.LastRun = r.lastRun(start, res, runErr)
	if merged, err := r.persist(ctx, snap, next, obs, acts, rep); err != nil {
		if interrupted(ctx) {
			// What persist last tried to write: after a conflict, the other
			// writer's state with this run's merged in, never this run's alone.
			return rep, r.saveInterrupted(ctx, snap, merged, start, res, rep, err)
		}
		var failure *Error
		if errors.As(err, &failure) {
			// Against what this run planned (next), not what it read: if it has just
			// sent recovered, the failure must be alerted afresh, not deduplicated
			// against a watchdog-error that recovered closed.
			r.alertFailure(ctx, next, failure, rep)
		}
		return rep, err
	}
	r.Log.Info().Str("verdict", string(res.Verdict)).Str("action", string(res.Action)).Bool("dryRun", r.DryRun).
		Int("samples", rep.Samples).Str("took", r.Clock.Since(start).Round(time.Millisecond).String()).
		Str("reason", res.Reason).Msg("run complete")
	return rep, runErr
}

// observe takes one observation of this run.
func (r *Runner) observe(ctx context.Context, runStart time.Time, consistent bool) (decide.Observation, error) {
	var obs decide.Observation
	var err error
	if consistent {
		obs, err = r.Observer.ObserveConsistent(ctx)
	} else {
		obs, err = r.Observer.Observe(ctx)
	}
	obs.RunStart = runStart
	return obs, err
}

// decide judges obs. When a restart is due it first takes the last look the
// restart needs: the pods and EndpointSlices again with a consistent read (obs is
// replaced by that observation), and the Deployment for the rollout gate.
func (r *Runner) decide(ctx context.Context, obs *decide.Observation, prev *state.State, rep *Report) (*state.State, decide.Result) {
	next, res := decide.Decide(*obs, prev, r.Decide)
	// Each read is taken at most once; the rollout gate comes before the
	// consistent-read gate, so the Deployment is read first.
	for range 2 {
		switch {
		case res.NeedRollout && obs.Rollout == nil:
			obs.Rollout = r.Observer.Rollout(ctx, obs.Pods...)
		case res.NeedConsistentRead && !obs.Consistent:
			fresh, err := r.observe(ctx, obs.RunStart, true)
			if err != nil {
				r.Log.Warn().Err(err).Msg("consistent re-read before a restart failed: no restart this run")
				obs.ConsistentErr = err
			} else {
				rep.Samples++
				fresh.Rollout = obs.Rollout
				*obs = fresh
			}
		default:
			return next, res
		}
		next, res = decide.Decide(*obs, prev, r.Decide)
	}
	return next, res
}

// confirm keeps sampling while a wedge is being confirmed (strong evidence, not yet
// over the confirm window) or probed (no earlier counter value to compare with),
// for at most the confirm window and never past the run's deadline.
func (r *Runner) confirm(ctx context.Context, start time.Time, obs *decide.Observation, next *state.State, res decide.Result, rep *Report) (*state.State, decide.Result) {
	if r.Decide.ConfirmWindow <= 0 || r.SampleInterval <= 0 {
		return next, res
	}
	probing := map[string]bool{}
	for _, t := range res.Targets {
		if t.Verdict == decide.VerdictWedged && t.NoBaseline && t.Action == decide.ActionWait {
			probing[t.UID] = true
		}
	}
	for {
		// Sampling on can make a restart due within this run (the confirm window,
		// or the rest of --wedged-for) if it fits before the deadline less two
		// reserves: one to persist, one for the reads a restart needs first (the
		// Deployment and owner chain, the consistent re-list and re-scrape), since
		// a deadline passing there would lose the restart and page watchdog-error.
		// Otherwise the next run continues. A first sight also samples for the
		// window, to find out whether the evidence is strong.
		left := time.Duration(math.MaxInt64)
		if deadline, ok := ctx.Deadline(); ok {
			left = deadline.Sub(r.Clock.Now()) - 2*reserve(start, deadline)
		}
		probed := r.Clock.Since(start) >= r.Decide.ConfirmWindow+r.SampleInterval
		need, cut := false, false
		for _, t := range res.Targets {
			if t.Action != decide.ActionWait {
				continue
			}
			if t.SampleFor != nil && roundUp(*t.SampleFor, r.SampleInterval) <= left {
				need = true
			} else if t.Confirming {
				cut = true
			}
			if probing[t.UID] && !probed && r.SampleInterval <= left {
				need = true
			}
		}
		if !need {
			if cut {
				msg := "the run deadline cut confirmation short; the next run continues it"
				r.Log.Warn().Msg(msg)
				rep.Warnings = append(rep.Warnings, msg)
			}
			return next, res
		}
		r.Log.Info().Str("verdict", string(res.Verdict)).Str("reason", res.Reason).Dur("in", r.SampleInterval).Msg("sampling again to confirm")
		select {
		case <-ctx.Done():
			return next, res
		case <-r.Clock.After(r.SampleInterval):
		}
		obs2, err := r.observe(ctx, start, false)
		if err != nil {
			msg := fmt.Sprintf("confirmation stopped: %v", err)
			r.Log.Warn().Err(err).Msg("confirmation stopped")
			rep.Warnings = append(rep.Warnings, msg)
			return next, res
		}
		rep.Samples++
		next, res = r.decide(ctx, &obs2, next, rep)
		*obs = obs2
	}
}

// roundUp is d rounded up to a whole number of sampling intervals: when the sample
// that makes a restart due will be taken.
func roundUp(d, interval time.Duration) time.Duration {
	if interval <= 0 || d <= 0 {
		return max(d, 0)
	}
	return (d + interval - 1) / interval * interval
}

// pass is what a run acts on: the state snapshot it read (and writes over), its
// latest observation, the next state and the decision, and the report it fills.
// Acting may move all of them on: a lost claim race re-reads and judges again.
type pass struct {
	snap *statestore.Snapshot
	obs  *decide.Observation
	next *state.State
	res  decide.Result
	rep  *Report
}

// act claims and carries out the restarts the decision asks for. The claim is
// written first with the resourceVersion read at the start, so of two racing runs
// only one acts; the loser re-judges from the winner's state.
func (r *Runner) act(ctx context.Context, p *pass) ([]alert.ActOutcome, error) {
	if p.res.Action != decide.ActionRestart {
		return nil, nil
	}
	if r.DryRun {
		for _, t := range p.res.Targets {
			if t.Action == decide.ActionRestart {
				r.Log.Info().Str("pod", t.Pod).Str("uid", t.UID).Str("gates", decide.GateSummary(t)).Msg("dry run: would restart")
			}
		}
		return nil, nil
	}
	if claimed, err := r.claim(ctx, p); !claimed {
		return nil, err
	}
	return r.restart(ctx, p), nil
}

// claim writes the restarts of p's decision into the state before any is carried
// out. On a lost race it re-reads, judges again and retries; it reports false when
// the new judgement restarts nothing (another run took care of it) or on an error.
func (r *Runner) claim(ctx context.Context, p *pass) (bool, error) {
	now := r.Clock.Now()
	backoff := claimBackoff
	for {
		claimed := p.next.Clone()
		for _, t := range p.res.Targets {
			if t.Action == decide.ActionRestart && t.Resume {
				// Take the unfinished claim over: a run racing on it then conflicts,
				// re-reads, and finds it freshly claimed instead of completing it too.
				if rec := claimed.RestartFor(t.UID); rec != nil {
					at := now
					rec.ResumedAt = &at
				}
			}
			if t.Action == decide.ActionRestart && !t.Resume {
				claimed.Restarts = append(claimed.Restarts, state.Restart{
					Pod: t.Pod, UID: t.UID, Method: r.Restarter.Method(), ClaimedAt: now,
					Outcome: state.RestartClaimed, Reason: state.Truncate(t.Reason, 400), Evidence: string(t.Evidence),
				})
			}
		}
		claimed.LastRun = r.lastRun(now, p.res, nil)
		err := r.Store.Save(ctx, p.snap, claimed, now)
		if err == nil {
			p.rep.StateWritten = true
			p.next = claimed
			return true, nil
		}
		if !errors.Is(err, statestore.ErrConflict) {
			return false, r.failRun(ctx, p.snap, p.rep, &Error{What: "claim restart in state", Err: err})
		}
		if backoff.Steps <= 1 {
			return false, r.failRun(ctx, p.snap, p.rep, &Error{What: "claim restart in state", Err: fmt.Errorf("gave up after repeated conflicts: %w", err)})
		}
		r.Log.Warn().Msg("lost the restart claim race: re-reading state and judging again")
		select {
		case <-ctx.Done():
			return false, r.failRun(ctx, p.snap, p.rep, &Error{What: "claim restart in state", Err: ctx.Err()})
		case <-r.Clock.After(backoff.Step()):
		}
		latest, lerr := r.Store.Load(ctx)
		if lerr != nil {
			return false, r.failRun(ctx, p.snap, p.rep, &Error{What: "re-read state after a conflict", Err: lerr})
		}
		*p.snap = *latest
		p.obs.Merge = true // the winner may have observed later: never rewind it
		p.next, p.res = r.decide(ctx, p.obs, p.snap.State, p.rep)
		decide.CountRun(p.next, p.res.Verdict)
		if p.res.Action != decide.ActionRestart {
			r.Log.Info().Str("reason", p.res.Reason).Msg("another run already took care of it")
			return false, nil
		}
	}
}

// restart carries out the claimed restarts of p's decision, recording each
// outcome in p.next and the report.
func (r *Runner) restart(ctx context.Context, p *pass) []alert.ActOutcome {
	var acts []alert.ActOutcome
	for _, t := range p.res.Targets {
		if t.Action != decide.ActionRestart {
			continue
		}
		actx, cancel := context.WithTimeout(ctx, 30*time.Second)
		result, err := r.Restarter.Restart(actx, t.Pod, t.UID)
		cancel()
		rec := p.next.RestartFor(t.UID)
		doneAt := r.Clock.Now()
		a := alert.ActOutcome{Target: t, Detail: result.Detail}
		if err != nil && interrupted(ctx) {
			// Whether the request reached the API server is unknown: the claim
			// stays, and the next run completes or settles it.
			r.Log.Warn().Err(err).Str("pod", t.Pod).Str("uid", t.UID).Msg("shutdown during the restart: the claim is left for the next run")
			continue
		}
		if err != nil {
			a.Err = err
			rec.Outcome, rec.Error = state.RestartFailed, err.Error()
			r.Log.Error().Err(err).Str("pod", t.Pod).Str("uid", t.UID).Msg("restart failed")
		} else {
			a.Done = true
			rec.Outcome, rec.DoneAt = state.RestartDone, &doneAt
			if result.Gone {
				rec.Error = result.Detail
			}
			r.Log.Warn().Str("pod", t.Pod).Str("uid", t.UID).Str("method", r.Restarter.Method()).Str("detail", result.Detail).Str("reason", t.Reason).Msg("restarted")
			r.deploymentEvent(ctx, p.obs, t, result.Detail, p.rep)
		}
		p.rep.Restarts = append(p.rep.Restarts, RestartReport{Pod: t.Pod, UID: t.UID, Method: r.Restarter.Method(), Outcome: rec.Outcome, Detail: firstNonEmpty(rec.Error, result.Detail)})
		acts = append(acts, a)
	}
	return acts
}

func (r *Runner) dispatcher() *alert.Dispatcher {
	d := &alert.Dispatcher{Sinks: r.Sinks}
	if r.Events != nil {
		d.Events = r.notificationEvent
		d.OnFailure = r.deliveryFailedEvent
	}
	return d
}

// notificationEvent records an alert as an Event on its pod, or on the state
// ConfigMap when no pod is concerned (blind, watchdog-error).
func (r *Runner) notificationEvent(ctx context.Context, n alert.Notification) error {
	eventType := corev1.EventTypeWarning
	if n.Severity == alert.SeverityInfo {
		eventType = corev1.EventTypeNormal
	}
	msg := fmt.Sprintf("[%s] %s", n.Event, n.Reason)
	if n.DryRun {
		msg = "[dry run] " + msg
	}
	return r.Events.Emit(ctx, r.eventTarget(n), eventType, eventReason(n.Event), msg)
}

func (r *Runner) deliveryFailedEvent(ctx context.Context, n alert.Notification, sink string, err error) {
	msg := fmt.Sprintf("alert %s (%s) to %s failed; retried by the next run that can write state: %v", n.Event, n.ID, sink, err)
	if eerr := r.Events.Emit(ctx, r.eventTarget(n), corev1.EventTypeWarning, events.ReasonAlertFailed, msg); eerr != nil {
		r.Log.Warn().Err(eerr).Msg("could not leave an Event about a failed alert")
	}
}

func (r *Runner) eventTarget(n alert.Notification) corev1.ObjectReference {
	if n.Pod != "" {
		return corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: r.Namespace, Name: n.Pod, UID: types.UID(n.UID)}
	}
	return corev1.ObjectReference{Kind: "ConfigMap", APIVersion: "v1", Namespace: r.Namespace, Name: r.StateConfigMap}
}

// eventReasons maps alert events to Event reasons.
var eventReasons = map[string]string{
	alert.EventWedged: events.ReasonWedged, alert.EventDegraded: events.ReasonDegraded,
	alert.EventRestarted: events.ReasonRestarted, alert.EventRestartFailed: events.ReasonRestartFailed,
	alert.EventRestartBlocked: events.ReasonRestartBlocked, alert.EventRecovered: events.ReasonRecovered,
	alert.EventRestartIneffective: events.ReasonRestartIneffective,
	alert.EventBlind:              events.ReasonBlind,
}

func eventReason(ev string) string {
	if r, ok := eventReasons[ev]; ok {
		return r
	}
	return "Watchdog"
}

func (r *Runner) deploymentEvent(ctx context.Context, obs *decide.Observation, t decide.Target, detail string, rep *Report) {
	if r.Events == nil || obs.Rollout == nil || !obs.Rollout.Found {
		return
	}
	ref := corev1.ObjectReference{Kind: "Deployment", APIVersion: "apps/v1", Namespace: r.Namespace, Name: obs.Rollout.Name, UID: types.UID(obs.Rollout.UID)}
	msg := fmt.Sprintf("Watchdog restarted pod %s: %s. %s", t.Pod, t.Reason, detail)
	if err := r.Events.Emit(ctx, ref, corev1.EventTypeWarning, events.ReasonRestarted, msg); err != nil {
		r.Log.Warn().Err(err).Msg("could not leave an Event on the Deployment")
		rep.Warnings = append(rep.Warnings, err.Error())
	}
}

// persist writes the final state. If another writer got in since our last write,
// judge again from its state and re-apply what this run did (restart outcomes,
// alert bookkeeping), then retry: only this merge is safe to retry.
func (r *Runner) persist(ctx context.Context, snap *statestore.Snapshot, next *state.State, obs decide.Observation, acts []alert.ActOutcome, rep *Report) (*state.State, error) {
	if r.DryRun {
		return next, nil
	}
	backoff := claimBackoff
	obs.Merge = true // any re-decision below merges into another writer's state
	for {
		err := r.Store.Save(ctx, snap, next, r.Clock.Now())
		if err == nil {
			rep.StateWritten = true
			return next, nil
		}
		if !errors.Is(err, statestore.ErrConflict) || backoff.Steps <= 1 {
			r.Log.Error().Err(err).Msg("cannot write state")
			return next, &Error{What: "write state", Err: err}
		}
		select {
		case <-ctx.Done():
			return next, &Error{What: "write state", Err: ctx.Err()}
		case <-r.Clock.After(backoff.Step()):
		}
		latest, lerr := r.Store.Load(ctx)
		if lerr != nil {
			return next, &Error{What: "re-read state after a conflict", Err: lerr}
		}
		r.Log.Warn().Msg("state changed during the run: merging this run's outcome into it")
		merged, _ := decide.Decide(obs, latest.State, r.Decide)
		decide.CountRun(merged, decide.Verdict(next.LastRun.Verdict))
		// Only the records of the restarts this run carried out are this run's to
		// write; the others are as the latest state has them (re-writing them from
		// this run's older copy would, say, turn another run's "done" back into
		// "claimed").
		for _, a := range acts {
			if rec := next.RestartFor(a.Target.UID); rec != nil {
				upsertRestart(merged, *rec)
			}
		}
		merged.Alerts, merged.LastRun = mergeAlerts(next.Alerts, latest.State.Alerts, next.LastRun.At), next.LastRun
		merged.Outbox = mergeOutbox(next.Outbox, latest.State.Outbox, rep.Alerts)
		*snap = *latest
		next = merged
	}
}

// mergeAlerts keeps, per event, the more recently sent record of the two
// writers, and the other writer's alerts opened after this run began (an alert
// this run closed stays closed), so that neither's open problem is lost and no
// recovered is sent twice.
func mergeAlerts(ours, theirs map[string]*state.Alert, runStart time.Time) map[string]*state.Alert {
	out := make(map[string]*state.Alert, len(ours)+len(theirs))
	for ev, a := range ours {
		out[ev] = a
	}
	for ev, t := range theirs {
		a, ok := out[ev]
		switch {
		case ok && sentAfter(t, a):
			out[ev] = t
		case !ok && t.OpenedAt.After(runStart):
			out[ev] = t
		}
	}
	return out
}

func sentAfter(a, b *state.Alert) bool {
	return a.LastSentAt != nil && (b.LastSentAt == nil || a.LastSentAt.After(*b.LastSentAt))
}

// mergeOutbox keeps this run's outbox plus the alerts another writer left pending
// that this run neither holds nor handled (delivered or dropped): replacing the
// outbox with this run's would lose them without a trace.
func mergeOutbox(ours, theirs []state.Pending, handled []alert.Delivery) []state.Pending {
	known := make(map[string]bool, len(ours)+len(handled))
	for _, p := range ours {
		known[p.ID] = true
	}
	for _, d := range handled {
		known[d.ID] = true
	}
	out := append([]state.Pending(nil), ours...)
	for _, p := range theirs {
		if !known[p.ID] {
			out = append(out, p)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out
}

func upsertRestart(s *state.State, rec state.Restart) {
	for i := range s.Restarts {
		if s.Restarts[i].UID == rec.UID && s.Restarts[i].ClaimedAt.Equal(rec.ClaimedAt) {
			s.Restarts[i] = rec
			return
		}
	}
	s.Restarts = append(s.Restarts, rec)
}

// failRun records a failed run in state when it can (not in a dry run), so that
// `watchdog status` shows it, and returns the failure. The run observed nothing
// that counts: like an unknown, it pauses every wedge clock, or the next wedged
// observation would count the whole gap ("ten minutes without information" would
// become "wedged for 10m").
func (r *Runner) failRun(ctx context.Context, snap *statestore.Snapshot, rep *Report, failure *Error) error {
	if interrupted(ctx) {
		s := snap.State.Clone()
		decide.RunFailed(s)
		return r.saveInterrupted(ctx, snap, s, r.Clock.Now(), decide.Result{Verdict: decide.VerdictUnknown, Action: decide.ActionNone, Reason: failure.What + " cut short"}, rep, failure)
	}
	r.Log.Error().Err(failure.Err).Str("what", failure.What).Msg("run failed")
	rep.Error = failure.Error()
	if r.DryRun {
		return failure
	}
	s := snap.State.Clone()
	decide.RunFailed(s)
	s.LastRun = r.lastRun(r.Clock.Now(), decide.Result{Verdict: decide.VerdictUnknown, Action: decide.ActionNone, Reason: failure.What + " failed"}, failure)
	decide.CountRun(s, decide.VerdictUnknown)
	notes := alert.PlanFailure(s, failure, r.Clock.Now(), r.Plan)
	// Send before saving, so that what could not be delivered stays in the outbox
	// and what the outbox delivered leaves it. The run's deadline may be what
	// failed: alerting and the save get short deadlines of their own.
	r.sendFailure(ctx, s, notes, rep, 15*time.Second, true)
	if err := r.saveWithin(ctx, snap, s, 10*time.Second, rep); err != nil {
		r.Log.Error().Err(err).Msg("could not record the failed run in state either")
	}
	return failure
}

// saveWithin writes s with a deadline of its own: the run's may be spent, or its
// context cancelled, which is often why it is saving this way.
func (r *Runner) saveWithin(ctx context.Context, snap *statestore.Snapshot, s *state.State, d time.Duration, rep *Report) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d)
	defer cancel()
	if err := r.Store.Save(sctx, snap, s, r.Clock.Now()); err != nil {
		return err
	}
	rep.StateWritten = true
	return nil
}

// interrupt reports a pass cut short by shutdown: logged, nothing sent.
func (r *Runner) interrupt(rep *Report, cause error) error {
	r.Log.Warn().Err(cause).Msg("pass cut short by shutdown: nothing alerted")
	rep.Error = ErrInterrupted.Error()
	return fmt.Errorf("%w: %v", ErrInterrupted, cause)
}

// saveInterrupted writes what an interrupted pass knows (its observations so far,
// or the pause of a pass that saw nothing) within a short grace of its own, and
// sends nothing: a shutdown is not the watchdog failing.
func (r *Runner) saveInterrupted(ctx context.Context, snap *statestore.Snapshot, s *state.State, start time.Time, res decide.Result, rep *Report, cause error) error {
	err := r.interrupt(rep, cause)
	if r.DryRun {
		return err
	}
	s.LastRun = r.lastRun(start, res, nil)
	s.LastRun.Outcome, s.LastRun.Error = "interrupted", state.Truncate(cause.Error(), 500)
	if serr := r.saveWithin(ctx, snap, s, shutdownGrace, rep); serr != nil {
		r.Log.Warn().Err(serr).Msg("interrupted pass could not write its state")
	}
	return err
}

// alertFailure sends watchdog-error for a failure that leaves no state to write
// (state unreadable or unwritable), deduplicated against s when there is one.
func (r *Runner) alertFailure(ctx context.Context, s *state.State, failure *Error, rep *Report) {
	r.Log.Error().Err(failure.Err).Str("step", failure.What).Msg("a step of the run failed")
	rep.Error = failure.Error()
	if r.DryRun {
		return
	}
	// Nothing this sends can be recorded: leave the outbox to a run that can, or
	// what it delivers would be delivered again.
	c := s.Clone()
	c.Outbox = nil
	r.sendFailure(ctx, c, alert.PlanFailure(s.Clone(), failure, r.Clock.Now(), r.Plan), rep, 20*time.Second, false)
}

// sendFailure delivers notes (and s's outbox) within budget of its own. stateWritten
// says whether s will be saved: if not, no failed delivery is kept for later.
func (r *Runner) sendFailure(ctx context.Context, s *state.State, notes []alert.Notification, rep *Report, budget time.Duration, stateWritten bool) {
	if len(notes) == 0 && len(s.Outbox) == 0 && len(s.Alerts) == 0 {
		return
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), budget)
	defer cancel()
	d := r.dispatcher()
	ds := d.Deliver(actx, s, notes, r.Clock.Now(), false)
	ds = append(ds, d.Refresh(actx, s, r.Clock.Now(), false)...) // a failing watchdog must not let open alerts expire
	for i := range ds {
		ds[i].Kept = ds[i].Kept && stateWritten
	}
	rep.Alerts = append(rep.Alerts, ds...)
	r.logDeliveries(ds)
}

func (r *Runner) lastRun(start time.Time, res decide.Result, err error) *state.Run {
	run := &state.Run{At: start.UTC(), Took: state.Duration(r.Clock.Since(start).Round(time.Millisecond)),
		Verdict: string(res.Verdict), Action: string(res.Action), Reason: state.Truncate(res.Reason, 500), Outcome: "ok", Watchdog: r.Version}
	if err != nil {
		run.Outcome, run.Error = "error", state.Truncate(err.Error(), 500)
	}
	return run
}

func observationError(obs decide.Observation) error {
	switch {
	case obs.ExpectedErr != nil:
		return &Error{What: "count serving nodes", Err: obs.ExpectedErr}
	case obs.Leader != nil && obs.Leader.Err != nil:
		return &Error{What: "read leader Lease", Err: obs.Leader.Err}
	case obs.Rollout != nil && obs.Rollout.Err != nil:
		return &Error{What: "read scheduler Deployment", Err: obs.Rollout.Err}
	case obs.Rollout != nil && obs.Rollout.OwnersErr != nil:
		return &Error{What: "read scheduler ReplicaSet", Err: obs.Rollout.OwnersErr}
	}
	return nil
}

func (r *Runner) logDecision(res decide.Result, rep *Report) {
	for _, t := range res.Targets {
		for _, w := range t.Warnings {
			r.Log.Warn().Str("pod", t.Pod).Str("uid", t.UID).Str("detail", w).Msg("doubt about the observation")
			rep.Warnings = append(rep.Warnings, t.Pod+": "+w)
		}
		ev := r.Log.Info()
		if t.Verdict == decide.VerdictWedged || t.Verdict == decide.VerdictDegraded || t.Verdict == decide.VerdictUnknown {
			ev = r.Log.Warn()
		}
		ev = ev.Str("pod", t.Pod).Str("uid", t.UID).Bool("judged", t.Judged).Str("verdict", string(t.Verdict)).Str("action", string(t.Action))
		if t.Ready != nil {
			ev = ev.Int("ready", *t.Ready)
		}
		if t.Expected != nil {
			ev = ev.Int("expected", *t.Expected)
		}
		if t.Evidence != "" {
			ev = ev.Str("evidence", string(t.Evidence))
		}
		if len(t.Gates) > 0 {
			ev = ev.Str("gates", decide.GateSummary(t))
		}
		ev.Str("reason", t.Reason).Msg("pod judged")
	}
}

func (r *Runner) logDeliveries(ds []alert.Delivery) {
	for _, d := range ds {
		switch {
		case d.DryRun:
			r.Log.Info().Str("event", d.Event).Str("sink", d.Sink).Msg("dry run: would send alert")
		case !d.OK:
			ev := r.Log.Error().Str("event", d.Event).Str("sink", d.Sink).Str("error", d.Error).Bool("retry", d.Retry).Bool("kept", d.Kept)
			if d.Kept {
				ev.Msg("alert delivery failed; kept for the next run")
			} else {
				ev.Msg("alert delivery failed; not kept")
			}
		default:
			r.Log.Info().Str("event", d.Event).Str("sink", d.Sink).Bool("retry", d.Retry).Msg("alert delivered")
		}
	}
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
