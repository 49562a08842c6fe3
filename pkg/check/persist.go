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

// persist writes the run's outcome, p.next. The pass holds the Lease, so no other
// pass writes meanwhile: a lost write (the resourceVersion changed: someone else
// wrote) ends the pass, alerted, as any other failure to write does. A write the
// shutdown cut short saves what it last tried, within the shutdown grace.
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
	p.Log.Error().Err(err).Str("what", failure.Step.What).Msg("cannot write state")
	if interrupted(p.ctx) {
		return p.saveInterrupted(p.next, p.res, failure)
	}
	// Against what this run planned, not what it read: after a recovered just sent,
	// the failure is alerted afresh.
	p.alertFailure(p.next, failure)
	return failure
}

// failRun records a failed run in state when it can (not in a dry run), for
// `watchdog status`, and returns the failure. Like an unknown it pauses every wedge
// clock, or the next wedged observation would count the whole gap as wedged.
func (p *pass) failRun(failure *Error) error {
	s := p.snap.State.Clone()
	decide.RunFailed(s)
	if interrupted(p.ctx) {
		// The run record names the step cut short; the report keeps the decision.
		return p.saveInterrupted(s, unknown(failure.Step.What+" cut short"), failure)
	}
	p.Log.Error().Err(failure.Err).Str("what", failure.Step.What).Msg("run failed")
	p.rep.Error = failure.Error()
	if p.Mode == state.ModeDryRun {
		return failure
	}
	s.LastRun = p.lastRun(p.Clock.Now(), unknown(failure.Step.What+" failed"), failure)
	decide.CountRun(s, state.VerdictUnknown)
	// Send before saving, so the outbox keeps what failed and drops what was delivered.
	p.reportDeliveries(p.sendFailure(s, alert.PlanFailure(s, failure, p.Clock.Now(), p.Source, p.Mode, p.Alerts)))
	if err := p.saveWithin(s, failureSaveBudget); err != nil {
		p.Log.Error().Err(err).Msg("could not record the failed run in state either")
	}
	return failure
}

// saveWithin writes s with a deadline of its own (failureSaveBudget says why).
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

// saveInterrupted ends a pass cut short by shutdown: it sends nothing, and writes
// what the pass knows in s (its observations so far, or the pause of one that saw
// nothing; nil: no state was read) with res as the run's decision, within shutdownGrace.
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

// alertFailure sends watchdog-error for a failure that leaves no state to write
// (state unreadable or unwritable), deduplicated against s when there is one.
func (p *pass) alertFailure(s *state.State, failure *Error) {
	p.Log.Error().Err(failure.Err).Str("step", failure.Step.What).Msg("a step of the run failed")
	p.rep.Error = failure.Error()
	if p.Mode == state.ModeDryRun {
		return
	}
	// Nothing sent here can be recorded: leave the outbox to a run that can, or it
	// would be delivered again; and no failed delivery is kept.
	c := s.Clone()
	c.Outbox = nil
	ds := p.sendFailure(c, alert.PlanFailure(s.Clone(), failure, p.Clock.Now(), p.Source, p.Mode, p.Alerts))
	for i := range ds {
		ds[i].Kept = false
	}
	p.reportDeliveries(ds)
}

// sendFailure delivers notes and s's outbox and refreshes its open alerts, within
// failureSendBudget.
func (p *pass) sendFailure(s *state.State, notes []alert.Notification) []deliver.Delivery {
	if len(notes) == 0 && len(s.Outbox) == 0 && len(s.Alerts) == 0 {
		return nil
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(p.ctx), failureSendBudget)
	defer cancel()
	d := p.dispatcher()
	return d.Deliver(actx, s, notes, p.Clock.Now()) // a failing watchdog must not let open alerts expire
}

// reportDeliveries adds deliveries to the report and the log; an outbox entry
// dropped is a warning of the run.
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
