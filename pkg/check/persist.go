package check

import (
	"context"
	"fmt"
	"time"

	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/deliver"
	"github.com/agentenv/watchdog/pkg/state"
)

// persist writes the run's outcome, p.next. The pass holds the Lease: a lost write
// (someone else wrote) ends it, alerted, as any other failure to write does.
func (p *pass) persist(runErr error) error {
	p.next.LastRun = p.lastRun(p.start, p.res, runErr)
	if p.Mode == state.ModeDryRun {
		return nil
	}
	err := p.Store.Save(p.ctx, p.snap, p.next, p.Clock.Now())
	if err == nil {
		p.rep.StateWritten = true
		return nil
	}
	failure := &Error{Step: StepWriteState, Err: err}
	if interrupted(p.ctx) {
		return p.saveInterrupted(p.next, p.res, failure)
	}
	// Against what this run planned: after a recovered just sent, alerted afresh.
	p.alertFailure(p.next, failure, false)
	return failure
}

// failRun records a failed run in state (not in a dry run) and returns the failure.
// Like an unknown it pauses every wedge clock: the next wedged observation must not
// count the whole gap as wedged.
func (p *pass) failRun(failure *Error) error {
	s := p.snap.State.Clone()
	decide.RunFailed(s)
	if interrupted(p.ctx) { // the run record names the step cut short; the report keeps the decision
		return p.saveInterrupted(s, unknown(failure.Step.What+" cut short"), failure)
	}
	s.LastRun = p.lastRun(p.Clock.Now(), unknown(failure.Step.What+" failed"), failure)
	decide.CountRun(s, state.VerdictUnknown)
	p.alertFailure(s, failure, true)
	if p.Mode == state.ModeDryRun {
		return failure
	}
	if err := p.saveWithin(s, failureSaveBudget); err != nil {
		p.Log.Error().Err(err).Msg("could not record the failed run in state either")
	}
	return failure
}

// saveWithin writes s with a deadline of its own (the pass's may be spent).
func (p *pass) saveWithin(s *state.State, d time.Duration) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(p.ctx), d)
	defer cancel()
	if err := p.Store.Save(sctx, p.snap, s, p.Clock.Now()); err != nil {
		return err
	}
	p.rep.StateWritten = true
	return nil
}

func unknown(reason string) decide.Result {
	return decide.Result{Verdict: state.VerdictUnknown, Action: state.ActionNone, Reason: reason}
}

// saveInterrupted ends a pass cut short by shutdown: nothing sent, s (nil: none read)
// written with res as the run's decision, within shutdownGrace.
func (p *pass) saveInterrupted(s *state.State, res decide.Result, cause error) error {
	p.Log.Warn().Err(cause).Msg("pass cut short by shutdown: nothing alerted")
	p.rep.Error = ErrInterrupted.Error()
	err := fmt.Errorf("%w: %v", ErrInterrupted, cause)
	if s == nil || p.Mode == state.ModeDryRun {
		return err
	}
	s.LastRun = p.lastRun(p.start, res, nil)
	s.LastRun.Outcome, s.LastRun.Error = state.RunInterrupted, state.Truncate(cause.Error(), 500)
	if serr := p.saveWithin(s, shutdownGrace); serr != nil {
		p.Log.Warn().Err(serr).Msg("interrupted pass could not write its state")
	}
	return err
}

// alertFailure sends watchdog-error for failure, deduplicated against s, with s's
// outbox and open alerts (a failing watchdog must not let them expire), within
// failureSendBudget. Into s when the caller then saves it; else nothing sent can be
// recorded: the outbox is left to a run that can, and no failed delivery is kept.
func (p *pass) alertFailure(s *state.State, failure *Error, saved bool) {
	p.Log.Error().Err(failure.Err).Str("step", failure.Step.What).Msg("a step of the run failed")
	p.rep.Error = failure.Error()
	if p.Mode == state.ModeDryRun {
		return
	}
	if !saved { // s is not written after this: nothing to copy
		s.Outbox = nil
	}
	notes := alert.PlanFailure(s, failure, p.Clock.Now(), p.Source, p.Mode, p.Alerts)
	actx, cancel := context.WithTimeout(context.WithoutCancel(p.ctx), failureSendBudget)
	defer cancel()
	ds := p.dispatcher().Deliver(actx, s, notes, p.Clock.Now())
	for i := range ds {
		ds[i].Kept = ds[i].Kept && saved
	}
	p.reportDeliveries(ds)
}

func (p *pass) reportDeliveries(ds []deliver.Delivery) {
	p.rep.Alerts = append(p.rep.Alerts, ds...)
	for _, d := range ds {
		switch {
		case d.Dropped:
			p.warn("outbox entry dropped", fmt.Sprintf("outbox entry %s (%s) dropped, never delivered: %s", d.ID, d.Event, d.Error))
		case d.DryRun:
			p.Log.Info().Str("event", d.Event).Str("sink", d.Sink).Msg("dry run: would send alert")
		case !d.OK:
			p.Log.Error().Str("event", d.Event).Str("sink", d.Sink).Str("error", d.Error).Bool("retry", d.Retry).
				Bool("kept", d.Kept).Msg("alert delivery failed; " + keptWord[d.Kept])
		default:
			p.Log.Info().Str("event", d.Event).Str("sink", d.Sink).Bool("retry", d.Retry).Msg("alert delivered")
		}
	}
}
