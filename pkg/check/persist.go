package check

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/deliver"
	"github.com/agentenv/watchdog/pkg/state"
	"github.com/agentenv/watchdog/pkg/statestore"
)

// persist writes the run's outcome, p.next. After another writer got in, it judges
// again from that state and re-applies what this run did (restart outcomes, alert
// bookkeeping) before retrying. A write the shutdown cut short saves what it last
// tried, within the shutdown grace; another failure is alerted.
func (p *pass) persist(acts []alert.ActOutcome, runErr error) error {
	p.next.LastRun = p.lastRun(p.start, p.res, runErr)
	if p.Mode == state.ModeDryRun {
		return nil
	}
	save := func() error { return p.Store.Save(p.ctx, p.snap, p.next, p.Clock.Now()) }
	failure := p.saveRetrying(StepWriteState, save, func() bool {
		p.Log.Warn().Msg("state changed during the run: merging this run's outcome into it")
		ours, latest := p.next, p.snap.State
		merged, _ := decide.Decide(p.obs, latest, p.Decide)
		decide.CountRun(merged, ours.LastRun.Verdict)
		// Only this run's restart records are its to write: rewriting the others
		// from its older copy could turn another run's "done" back into "claimed".
		p.keepOwnRestarts(merged, ours, acts)
		merged.Alerts, merged.LastRun = mergeAlerts(ours.Alerts, latest.Alerts, ours.LastRun.At), ours.LastRun
		merged.Outbox = mergeOutbox(ours.Outbox, latest.Outbox, p.rep.Alerts)
		p.next = merged
		return true
	})
	if failure == nil {
		return nil
	}
	p.Log.Error().Err(failure.Err).Str("what", failure.Step.What).Msg("cannot write state")
	if interrupted(p.ctx) {
		// After a conflict, p.next is the other writer's state with this run's merged in.
		return p.saveInterrupted(p.next, p.res, failure)
	}
	// Against what this run planned, not what it read: after a recovered just sent,
	// the failure is alerted afresh.
	p.alertFailure(p.next, failure)
	return failure
}

// saveRetrying calls save until it succeeds. After a lost race (statestore.ErrConflict)
// it waits out claimBackoff, re-reads p.snap and calls again, which judges again from
// it (never rewind a later observer) and says whether anything is left to write. Any
// other error, the back-off spent or the context cancelled end it with an *Error.
//
// Not client-go's retry.RetryOnConflict: its back-off sleeps on the wall clock and
// cannot be cancelled, where this waits on the pass's (injectable) clock and context.
func (p *pass) saveRetrying(step Step, save func() error, again func() bool) *Error {
	backoff := claimBackoff
	for {
		err := save()
		switch {
		case err == nil:
			p.rep.StateWritten = true
			return nil
		case !errors.Is(err, statestore.ErrConflict):
			return &Error{Step: step, Err: err}
		case backoff.Steps <= 1:
			return &Error{Step: step, Err: fmt.Errorf("gave up after repeated conflicts: %w", err)}
		}
		select {
		case <-p.ctx.Done():
			return &Error{Step: step, Err: p.ctx.Err()}
		case <-p.Clock.After(backoff.Step()):
		}
		latest, err := p.Store.Load(p.ctx)
		if err != nil {
			return &Error{Step: StepRereadState, Err: err}
		}
		*p.snap = *latest
		p.obs.KeepNewerRecords = true
		if !again() {
			return nil
		}
	}
}

// claimAlerts plans the run's notifications and writes their records (and outbox
// reservations) before any is sent, as the restart claim does: of two runs at once
// (Forbid is no guarantee) the loser re-reads, plans again and finds the problem
// paged, and a run that ends before its sends leaves them to the next. A claim that
// cannot be written otherwise sends anyway: a duplicate page is better than none.
func (p *pass) claimAlerts(d *deliver.Dispatcher, acts []alert.ActOutcome, runErr error) []alert.Notification {
	base := p.next.Clone() // before Plan records anything
	notes := alert.Plan(p.next, p.res, acts, runErr, p.Clock.Now(), p.Source, p.Mode, p.Alerts)
	if p.Mode == state.ModeDryRun || len(notes) == 0 {
		return notes
	}
	save := func() error {
		now := p.Clock.Now()
		claimed := p.next.Clone()
		d.Reserve(claimed, notes, now)
		return p.Store.Save(p.ctx, p.snap, claimed, now)
	}
	if failure := p.saveRetrying(StepRecordAlerts, save, func() bool {
		p.Log.Warn().Msg("state changed during the run: planning the alerts again from it")
		p.decide(p.snap.State)
		decide.CountRun(p.next, p.res.Verdict)
		p.keepOwnRestarts(p.next, base, acts)
		notes = alert.Plan(p.next, p.res, acts, runErr, p.Clock.Now(), p.Source, p.Mode, p.Alerts)
		return len(notes) > 0
	}); failure != nil {
		p.Log.Warn().Err(failure).Msg("cannot record the alerts before sending them: sending anyway")
	}
	return notes
}

// keepOwnRestarts copies into s, from ours, the records of this run's restarts
// (acts): replacing s's record of the same claim, adding a would-restart s lacks.
func (p *pass) keepOwnRestarts(s, ours *state.State, acts []alert.ActOutcome) {
	now := p.Clock.Now()
	for _, a := range acts {
		t := a.Target
		switch {
		case p.Mode == state.ModeShadow && t.BadSince != nil:
			if w := ours.WouldRestartFor(t.UID, *t.BadSince); w != nil && s.WouldRestartFor(t.UID, *t.BadSince) == nil {
				s.WouldRestarts = append(s.WouldRestarts, *w)
			}
		case p.Mode != state.ModeShadow:
			rec := decide.RestartOf(ours, t.UID, now)
			if rec == nil {
				continue
			}
			if i := slices.IndexFunc(s.Restarts, func(r state.Restart) bool { return r.UID == rec.UID && r.ClaimedAt.Equal(rec.ClaimedAt) }); i >= 0 {
				s.Restarts[i] = *rec
			} else {
				s.Restarts = append(s.Restarts, *rec)
			}
		}
	}
}

// mergeAlerts keeps, per event, the more recently sent record of the two writers,
// and theirs opened after this run began (one this run closed stays closed): no
// open problem is lost and no recovered sent twice.
func mergeAlerts(ours, theirs map[string]*state.Alert, runStart time.Time) map[string]*state.Alert {
	out := make(map[string]*state.Alert, len(ours)+len(theirs))
	maps.Copy(out, ours)
	for ev, t := range theirs {
		if a, ok := out[ev]; (ok && sentAfter(t, a)) || (!ok && t.OpenedAt.After(runStart)) {
			out[ev] = t
		}
	}
	return out
}

func sentAfter(a, b *state.Alert) bool {
	return a.LastSentAt != nil && (b.LastSentAt == nil || a.LastSentAt.After(*b.LastSentAt))
}

// mergeOutbox keeps this run's outbox plus the alerts another writer left pending
// that this run neither holds nor handled (delivered or dropped), which replacing
// the outbox would lose without a trace.
func mergeOutbox(ours, theirs []state.Pending, handled []deliver.Delivery) []state.Pending {
	has := func(ps []state.Pending, id string) bool {
		return slices.ContainsFunc(ps, func(p state.Pending) bool { return p.ID == id })
	}
	// Another run's reservation (a run never holds its own) gone from the latest
	// state: its run has sent and settled it.
	out := slices.DeleteFunc(slices.Clone(ours), func(p state.Pending) bool {
		return p.Attempts == 0 && !has(theirs, p.ID)
	})
	for _, p := range theirs {
		handledHere := slices.ContainsFunc(handled, func(d deliver.Delivery) bool { return d.ID == p.ID })
		if !handledHere && !has(ours, p.ID) {
			out = append(out, p)
		}
	}
	slices.SortStableFunc(out, func(a, b state.Pending) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out
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
	decide.CountRun(s, decide.VerdictUnknown)
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
	return decide.Result{Verdict: decide.VerdictUnknown, Action: decide.ActionNone, Reason: reason}
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
// dropped, or retried without a key to authenticate it, is a warning of the run.
func (p *pass) reportDeliveries(ds []deliver.Delivery) {
	p.rep.Alerts = append(p.rep.Alerts, ds...)
	unauthenticated := map[string]bool{}
	for _, d := range ds {
		switch {
		case d.Dropped:
			p.warn("outbox entry dropped", fmt.Sprintf("outbox entry %s (%s) dropped, never delivered: %s", d.ID, d.Event, d.Error))
			continue
		case d.DryRun:
			p.Log.Info().Str("event", d.Event).Str("sink", d.Sink).Msg("dry run: would send alert")
		case !d.OK:
			p.Log.Error().Str("event", d.Event).Str("sink", d.Sink).Str("error", d.Error).Bool("retry", d.Retry).
				Bool("kept", d.Kept).Msg("alert delivery failed; " + keptWord[d.Kept])
		default:
			p.Log.Info().Str("event", d.Event).Str("sink", d.Sink).Bool("retry", d.Retry).Msg("alert delivered")
		}
		if d.Unauthenticated {
			unauthenticated[d.ID] = true
		}
	}
	if n := len(unauthenticated); n > 0 {
		p.warn("outbox retried unauthenticated", fmt.Sprintf("%d outbox entr%s retried without authentication: "+
			"--outbox-key is not set, so an entry written into the state ConfigMap by someone else cannot be told "+
			"from the watchdog's (docs/alerts.md, \"The outbox\")", n, map[bool]string{true: "y", false: "ies"}[n == 1]))
	}
}
