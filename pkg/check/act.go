package check

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/deliver"
	"github.com/agentenv/watchdog/pkg/events"
	"github.com/agentenv/watchdog/pkg/evidence"
	"github.com/agentenv/watchdog/pkg/state"
)

func (p *pass) act() ([]alert.ActOutcome, error) {
	if p.res.Action != state.ActionRestart {
		return nil, nil
	}
	if p.Mode == state.ModeDryRun {
		for _, t := range p.restartTargets() {
			p.Log.Info().Str("pod", t.Pod).Str("uid", t.UID).Str("gates", decide.GateSummary(t)).Msg("dry run: would restart")
		}
		return nil, nil
	}
	if p.Mode == state.ModeShadow {
		return p.wouldRestart(), nil // no claim: budget, once-per-wedge and back-off see none
	}
	if claimed, err := p.claim(); !claimed {
		return nil, err
	}
	var acts []alert.ActOutcome
	for _, t := range p.restartTargets() {
		if a, ok := p.restartPod(t); ok {
			acts = append(acts, a)
		}
	}
	return acts, nil
}

// wouldRestart is shadow mode's restart, recorded once per episode (then counted), new ones returned.
func (p *pass) wouldRestart() []alert.ActOutcome {
	now := p.Clock.Now()
	var acts []alert.ActOutcome
	for _, t := range p.restartTargets() {
		since := ptr.Deref(t.BadSince, now)
		same := func(w state.WouldRestart) bool { return w.UID == t.UID && w.EpisodeSince.Equal(since) }
		if i := slices.IndexFunc(p.next.WouldRestarts, same); i >= 0 {
			w := &p.next.WouldRestarts[i]
			w.Repeats, w.LastAt = w.Repeats+1, now
			continue
		}
		gates := decide.GateSummary(t)
		bundle := p.captureEvidence(t, "would-restart")
		p.next.WouldRestarts = append(p.next.WouldRestarts, state.WouldRestart{Pod: t.Pod, UID: t.UID, At: now,
			EpisodeSince: since, Reason: state.Truncate(t.Reason, 400), Evidence: t.Evidence,
			Gates: state.Truncate(gates, 400), Bundle: bundle})
		detail := fmt.Sprintf("shadow mode: would have restarted pod %s (%s); nothing was restarted", t.Pod, p.Restarter.Method())
		p.Log.Warn().Str("pod", t.Pod).Str("uid", t.UID).Str("gates", gates).Msg("shadow mode: would restart")
		p.rep.WouldRestarts = append(p.rep.WouldRestarts, RestartReport{Pod: t.Pod, UID: t.UID,
			Method: p.Restarter.Method(), Outcome: alert.EventWouldRestart, Detail: detail})
		acts = append(acts, alert.ActOutcome{Target: t, Detail: detail, Evidence: bundle})
	}
	return acts
}

func (p *pass) restartTargets() []decide.Target {
	return slices.DeleteFunc(slices.Clone(p.res.Targets), func(t decide.Target) bool { return t.Action != state.ActionRestart })
}

// claim writes the decision's restarts into the state before any is carried out:
// a pass that ends before its outcome is written leaves the claim for the next.
// A failed write ends the pass, which records the state it read (failRun).
func (p *pass) claim() (bool, error) {
	now := p.Clock.Now()
	for _, t := range p.restartTargets() {
		if t.TakeOverClaim {
			if rec := decide.RestartOf(p.next, t.UID, now); rec != nil {
				rec.ResumedAt = ptr.To(now)
			}
			continue
		}
		p.next.Restarts = append(p.next.Restarts, state.Restart{Pod: t.Pod, UID: t.UID, Method: p.Restarter.Method(),
			ClaimedAt: now, Outcome: state.RestartClaimed, Reason: state.Truncate(t.Reason, 400), Evidence: t.Evidence,
			Gates: state.Truncate(decide.GateSummary(t), 400)})
	}
	p.next.LastRun = p.lastRun(now, p.res, nil)
	if err := p.Store.Save(p.ctx, p.snap, p.next, now); err != nil {
		return false, p.failRun(&Error{Step: StepClaim, Err: err})
	}
	p.rep.StateWritten = true
	return true, nil
}

// restartPod carries out one claimed restart, its outcome in p.next and the report.
// False when a shutdown cut the request short: the claim stays for the next run.
func (p *pass) restartPod(t decide.Target) (alert.ActOutcome, bool) {
	bundle := p.captureEvidence(t, "restart")
	actx, cancel := context.WithTimeout(p.ctx, restartTimeout)
	result, err := p.Restarter.Restart(actx, t.Pod, t.UID)
	cancel()
	doneAt := p.Clock.Now()
	rec := decide.RestartOf(p.next, t.UID, doneAt)
	if rec != nil {
		rec.Bundle = bundle
	}
	if err != nil && interrupted(p.ctx) { // whether it reached the API server is unknown
		p.Log.Warn().Err(err).Str("pod", t.Pod).Str("uid", t.UID).Msg("shutdown during the restart: the claim is left for the next run")
		return alert.ActOutcome{}, false
	}
	if err != nil {
		rec.Outcome, rec.Error = state.RestartFailed, err.Error()
		p.Log.Error().Err(err).Str("pod", t.Pod).Str("uid", t.UID).Msg("restart failed")
	} else {
		rec.Outcome, rec.DoneAt = state.RestartDone, &doneAt
		if !result.At.IsZero() {
			rec.ServerAt = &result.At
		}
		if result.Gone {
			rec.Error = result.Detail
		}
		p.Log.Warn().Str("pod", t.Pod).Str("uid", t.UID).Str("method", p.Restarter.Method()).Str("detail", result.Detail).Str("reason", t.Reason).Msg("restarted")
		p.deploymentEvent(t, result.Detail)
	}
	p.rep.Restarts = append(p.rep.Restarts, RestartReport{Pod: t.Pod, UID: t.UID, Method: p.Restarter.Method(),
		Outcome: rec.Outcome, Detail: cmp.Or(rec.Error, result.Detail), Evidence: bundle})
	return alert.ActOutcome{Target: t, Detail: result.Detail, Evidence: bundle, Err: err}, true
}

// captureEvidence saves t's evidence bundle just before it is restarted (or would
// be) and returns its key, "" when none was saved: a warning, never a reason not to
// restart. The log read and the save each get at most a quarter of what is left: a
// kubelet that never answers must not cost the bundle too.
func (p *pass) captureEvidence(t decide.Target, action string) string {
	if p.Evidence == nil {
		return ""
	}
	bound := func(d time.Duration) (context.Context, context.CancelFunc) {
		if dl, ok := p.ctx.Deadline(); ok {
			d = min(d, time.Until(dl)/4)
		}
		return context.WithTimeout(p.ctx, d)
	}
	ctx, cancel := bound(evidence.DefaultTimeout)
	b := p.Evidence.Capture(ctx, t, p.obs, action, p.Clock.Now())
	cancel()
	if b.LogError != "" && p.Evidence.Logs != nil { // without Logs, the log is not read by choice
		p.warn("evidence without the scheduler's log", b.LogError)
	}
	ctx, cancel = bound(evidence.SaveTimeout)
	defer cancel()
	if err := p.Evidence.Save(ctx, b); err != nil {
		p.warn("evidence not saved", err.Error())
		return ""
	}
	p.Log.Info().Str("pod", t.Pod).Str("bundle", b.Key).Int("logBytes", len(b.Log)).Msg("evidence saved")
	return b.Key
}

func (r *Runner) dispatcher() *deliver.Dispatcher {
	d := &deliver.Dispatcher{Sinks: r.Sinks, Mode: r.Mode, Source: r.Source}
	if r.Events != nil {
		d.Events = r.notificationEvent
		d.OnFailure = r.deliveryFailedEvent
	}
	return d
}

func (r *Runner) notificationEvent(ctx context.Context, n alert.Notification) error {
	eventType := corev1.EventTypeWarning
	if n.Severity == alert.SeverityInfo {
		eventType = corev1.EventTypeNormal
	}
	msg := fmt.Sprintf("[%s] %s", n.Event, n.Reason) // a dry run leaves no Event
	if n.Shadow {
		msg += " [shadow]"
	}
	if n.Paused != "" { // an annotator's words last, where a cut falls
		msg += " [" + n.Paused + "]"
	}
	return r.Events.Emit(ctx, r.eventTarget(n), eventType, alert.Spec(n.Event).Reason, msg)
}

func (r *Runner) deliveryFailedEvent(ctx context.Context, n alert.Notification, sink string, err error) {
	msg := fmt.Sprintf("alert %s (%s) to %s failed; retried by the next run that can write state: %v", n.Event, n.ID, sink, err)
	if eerr := r.Events.Emit(ctx, r.eventTarget(n), corev1.EventTypeWarning, events.ReasonAlertFailed, msg); eerr != nil {
		r.Log.Warn().Err(eerr).Msg("could not leave an Event about a failed alert")
	}
}

// eventTarget is n's pod, or the state ConfigMap when no pod is concerned (blind, watchdog-error).
func (r *Runner) eventTarget(n alert.Notification) corev1.ObjectReference {
	if n.Pod != "" {
		return corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: r.Source.Namespace, Name: n.Pod, UID: types.UID(n.UID)}
	}
	return corev1.ObjectReference{Kind: "ConfigMap", APIVersion: "v1", Namespace: r.Source.Namespace, Name: r.StateConfigMap}
}

// deploymentEvent leaves a Restarted Event on the Deployment too: the pod's goes with the pod.
func (p *pass) deploymentEvent(t decide.Target, detail string) {
	if p.Events == nil || p.obs.Rollout == nil || !p.obs.Rollout.Found {
		return
	}
	ref := corev1.ObjectReference{Kind: "Deployment", APIVersion: "apps/v1", Namespace: p.Source.Namespace, Name: p.obs.Rollout.Name, UID: types.UID(p.obs.Rollout.UID)}
	msg := fmt.Sprintf("Watchdog restarted pod %s: %s. %s", t.Pod, t.Reason, detail)
	if err := p.Events.Emit(p.ctx, ref, corev1.EventTypeWarning, alert.Spec(alert.EventRestarted).Reason, msg); err != nil {
		p.warn("could not leave an Event on the Deployment", err.Error())
	}
}
