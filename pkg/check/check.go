// Package check runs one watchdog pass (observe, decide, confirm, claim, act, alert, persist).
package check

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/utils/clock"

	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/evidence"
	"github.com/agentenv/watchdog/pkg/restart"
	"github.com/agentenv/watchdog/pkg/scrape"
	"github.com/agentenv/watchdog/pkg/state"
	"github.com/agentenv/watchdog/pkg/statestore"
)

// Options configure a pass.
type Options struct {
	Decide decide.Config
	Alerts alert.PlanConfig // the alerts' policy
	Mode   state.Mode
	Source alert.Source // who sends the alerts
	// SampleInterval is how often a sample starts while confirming: no faster than
	// the scheduler refreshes its gauges (docs/design.md, "The scheduler it guards").
	SampleInterval time.Duration
	StateConfigMap string
	ScrapeVia      scrape.Via // the Observer's scrape path, for the report
}

// Runner holds a pass's collaborators; those marked optional may be nil.
type Runner struct {
	Options
	Observer  Observer
	Store     Store
	Restarter restart.Restarter
	Events    EventRecorder // optional: alerts and restarts as Kubernetes Events
	Sinks     []alert.Sink  // where alerts go besides logs and Events
	// Evidence (optional) saves what the scheduler looked like just before a restart.
	Evidence *evidence.Keeper
	// Hold (optional) reads the firing alerts that hold restarts, just before one;
	// it alone turns the firing-alerts gate on (decide.Observation.HoldOnAlerts).
	Hold   AlertHold
	Prober Prober // optional: the discovery probe
	Clock  clock.Clock
	Log    zerolog.Logger
}

// AlertHold reads the firing alerts that hold restarts (deliver.AlertHold), errors in the answer.
type AlertHold interface {
	Read(ctx context.Context) *decide.FiringAlerts
}

// Step is a step of a pass that can fail: what it does, and the fixed word the
// dead man's switch receives when it fails.
type Step struct{ What, Category string }

// The steps a pass can fail at; observationError names the observe steps of the partial reads.
var (
	StepReadState  = Step{"read state", "read-state"}
	StepObserve    = Step{"observe", "observe"}
	StepClaim      = Step{"claim restart in state", "write-state"}
	StepWriteState = Step{"write state", "write-state"}
	StepRestart    = Step{"restart", "restart"}
)

// Error is a pass that could not do its job; the CLI exits 1 on it.
type Error struct {
	Step Step
	Err  error
}

func (e *Error) Error() string { return e.Step.What + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// ErrInterrupted is a pass cut short by its own shutdown (SIGTERM, or leadership
// lost in `watchdog run`): not a failure, so it alerts nobody and pings no /fail.
var ErrInterrupted = errors.New("pass cut short by shutdown")

// Bounds of their own: the firing alerts' read (the hold fails open: a slow
// Alertmanager must not cost the restart its time), and what an interrupted or
// failing pass still does (its deadline may be spent, its context cancelled).
const (
	restartTimeout    = 30 * time.Second // one restart request
	alertsTimeout     = 10 * time.Second
	shutdownGrace     = 5 * time.Second
	failureSendBudget = 15 * time.Second
	failureSaveBudget = 10 * time.Second
)

// interrupted: the pass's context was cancelled (a shutdown), not timed out (a failure).
func interrupted(ctx context.Context) bool {
	return errors.Is(ctx.Err(), context.Canceled)
}

// reserve is kept back from the run deadline for acting and persisting: a sixth, capped.
func reserve(start, deadline time.Time) time.Duration {
	return min(10*time.Second, deadline.Sub(start)/6)
}

// Run performs one pass, the report filled as far as it got, also on error.
func (r *Runner) Run(ctx context.Context) (*Report, error) {
	start := r.Clock.Now()
	p := &pass{Runner: r, ctx: ctx, start: start, rep: &Report{Time: start.UTC(), DryRun: r.Mode == state.ModeDryRun,
		Shadow: r.Mode == state.ModeShadow, Namespace: r.Source.Namespace, Cluster: r.Source.Cluster,
		ScrapeVia: r.ScrapeVia, Verdict: state.VerdictUnknown, Action: state.ActionNone}}
	defer func() { p.rep.Took = r.Clock.Since(start).Round(time.Millisecond).String() }()
	return p.rep, p.run()
}

// pass is one run of the Runner (run lists its steps). A failure ends it through
// failRun; a shutdown, at the end of the step it cut short, through saveInterrupted.
type pass struct {
	*Runner
	ctx     context.Context
	start   time.Time
	snap    *statestore.Snapshot // the state read, and written over
	obs     decide.Observation   // the latest
	next    *state.State
	res     decide.Result
	rep     *Report
	slowest time.Duration // the longest observation: a restart's reads should take as long
}

func (p *pass) run() error {
	defer p.beginProbe()()
	if err := p.begin(); err != nil {
		return err
	}
	p.decide(p.snap.State)
	p.confirm()
	decide.CountRun(p.next, p.res.Verdict)
	if interrupted(p.ctx) {
		p.rep.fill(p.res) // keep the episode's clock, act on nothing, tell nobody
		return p.saveInterrupted(p.next, p.res, errors.New("shutdown while observing"))
	}
	acts, err := p.act()
	p.rep.fill(p.res)
	for _, w := range p.res.Warnings {
		p.warn("run warning", w)
	}
	if err != nil {
		return err
	}
	p.logDecision()
	if interrupted(p.ctx) { // the restarts' outcomes are in next; nothing is sent
		return p.saveInterrupted(p.next, p.res, errors.New("shutdown while acting"))
	}
	runErr := p.notify(acts)
	if err := p.persist(runErr); err != nil {
		return err
	}
	p.Log.Info().Str("verdict", string(p.res.Verdict)).Str("action", string(p.res.Action)).Bool("dryRun", p.Mode == state.ModeDryRun).
		Int("samples", p.rep.Samples).Str("took", p.Clock.Since(p.start).Round(time.Millisecond).String()).
		Str("reason", p.res.Reason).Msg("run complete")
	return runErr
}

// begin reads the state and takes the first observation, in parallel.
func (p *pass) begin() error {
	var loadErr error
	var loading sync.WaitGroup
	loading.Go(func() { p.snap, loadErr = p.Store.Load(p.ctx) })
	obs, err := p.observe(p.Observer.Observe)
	loading.Wait()
	if loadErr != nil {
		p.rep.Reason = "cannot read state"
		if interrupted(p.ctx) {
			return p.saveInterrupted(nil, p.res, loadErr)
		}
		failure := &Error{Step: StepReadState, Err: loadErr}
		p.alertFailure(state.New(), failure, false)
		return failure
	}
	if p.snap.Recovered != "" {
		p.warn("starting with empty state", p.snap.Recovered)
	}
	if p.snap.Tampered != "" {
		p.warn("state tampered with", p.snap.Tampered)
	}
	if last := p.snap.State.LastRun; p.Mode == state.ModeLive && last != nil && last.Shadow {
		decide.LeaveShadow(p.snap.State, p.Decide)
		p.Log.Info().Msg("first live run after shadow mode: open episodes are confirmed afresh before any restart")
	}
	if err != nil {
		p.rep.Reason = "cannot list scheduler pods"
		return p.failRun(&Error{Step: StepObserve, Err: err})
	}
	p.obs = obs
	p.rep.Samples = 1
	return nil
}

// notify plans and sends the run's alerts, recorded in p.next, and returns the
// run's error: a failed API read (often missing RBAC), or a failed restart.
func (p *pass) notify(acts []alert.ActOutcome) error {
	runErr := observationError(p.obs)
	d := p.dispatcher()
	notes := alert.Plan(p.next, p.res, acts, runErr, p.Clock.Now(), p.Source, p.Mode, p.Alerts)
	if p.snap.Tampered != "" { // paged once: the state this run writes is sealed
		notes = append(notes, alert.PlanFailure(p.next, errors.New(p.snap.Tampered), p.Clock.Now(), p.Source, p.Mode, p.Alerts)...)
	}
	if deadline, ok := p.ctx.Deadline(); ok {
		d.SendBy = deadline.Add(-reserve(p.start, deadline)) // keep time to persist the outcome and the outbox
	}
	p.reportDeliveries(d.Deliver(p.ctx, p.next, notes, p.Clock.Now())) // refreshes open alerts too
	failed := slices.IndexFunc(acts, func(a alert.ActOutcome) bool { return a.Err != nil })
	if failed >= 0 && runErr == nil {
		runErr = &Error{Step: StepRestart, Err: acts[failed].Err}
	}
	return runErr
}

// warn logs detail under a fixed message and adds it to the report.
func (p *pass) warn(msg, detail string) {
	p.Log.Warn().Str("detail", detail).Msg(msg)
	p.rep.Warnings = append(p.rep.Warnings, detail)
}

func (p *pass) observe(read func(context.Context) (decide.Observation, error)) (decide.Observation, error) {
	began := p.Clock.Now()
	defer func() { p.slowest = max(p.slowest, p.Clock.Since(began)) }()
	obs, err := read(p.ctx)
	obs.RunStart, obs.HoldOnAlerts = p.start, p.Hold != nil
	if err == nil && p.Prober != nil {
		p.Prober.Read(p.ctx, &obs, p.Decide.Selection)
	}
	return obs, err
}

// decide judges p.obs against prev into p.next and p.res. A due restart first takes
// the reads it asks for, each at most once, one per decision, in restartGates' order
// (pkg/decide): the Deployment, a consistent re-read (replacing p.obs), the firing alerts.
func (p *pass) decide(prev *state.State) {
	p.next, p.res = decide.Decide(p.obs, prev, p.Decide)
	for range 3 {
		switch {
		case p.res.NeedRollout && p.obs.Rollout == nil:
			p.obs.Rollout = p.Observer.Rollout(p.ctx, p.obs.Pods...)
			if err := p.obs.Rollout.Err; err != nil {
				p.warn("read before a restart failed", fmt.Sprintf("reading the Deployment before a restart failed: %v; read again at the next sample while a restart still fits", err))
			}
		case p.res.NeedConsistentRead && !p.obs.Consistent:
			fresh, err := p.observe(p.Observer.ObserveConsistent)
			if err != nil {
				p.warn("read before a restart failed", fmt.Sprintf("the consistent re-read before a restart failed: %v; read again at the next sample while a restart still fits", err))
				p.obs.ConsistentErr = err
			} else {
				p.rep.Samples++
				fresh.Rollout, fresh.Alerts = p.obs.Rollout, p.obs.Alerts
				keepScrapes(&fresh, p.obs)
				p.obs = fresh
			}
		case p.res.NeedAlerts && p.obs.Alerts == nil:
			p.obs.Alerts = p.readAlerts()
		default:
			return
		}
		p.next, p.res = decide.Decide(p.obs, prev, p.Decide)
	}
}

// keepScrapes gives a pod of the consistent re-read whose scrape failed the same
// process's scrape of a moment earlier: the re-read is for the lists (a scrape is
// never cached), and a failed scrape would cost a sample.
func keepScrapes(fresh *decide.Observation, cached decide.Observation) {
	for i := range fresh.Pods {
		p := &fresh.Pods[i]
		j := slices.IndexFunc(cached.Pods, func(c decide.Pod) bool {
			return c.UID == p.UID && c.StartedAt.Equal(p.StartedAt) && c.Sample != nil && c.ScrapeErr == nil
		})
		if p.ScrapeErr != nil && j >= 0 {
			p.Sample, p.ScrapeErr = cached.Pods[j].Sample, nil
		}
	}
}

// readAlerts reads the firing alerts that hold restarts; unreadable, the hold fails open.
func (p *pass) readAlerts() *decide.FiringAlerts {
	ctx, cancel := context.WithTimeout(p.ctx, alertsTimeout)
	defer cancel()
	a := p.Hold.Read(ctx)
	if a.Err != nil {
		p.warn("firing alerts unreadable", fmt.Sprintf("cannot read the firing alerts that hold restarts (%v): the hold fails open, a due restart goes ahead", a.Err))
	}
	return a
}

// confirm samples on while a wedge is confirmed or its evidence weighed (no earlier counters), in time.
func (p *pass) confirm() {
	if p.Decide.ConfirmWindow <= 0 || p.SampleInterval <= 0 {
		return
	}
	unweighed := map[string]bool{}
	for _, t := range p.res.Targets {
		if t.Verdict == state.VerdictWedged && t.NoEarlierCounters && t.Action == state.ActionWait {
			unweighed[t.UID] = true
		}
	}
	// Samples start every SampleInterval from the first however long each takes: a
	// slow API server must not stretch the cadence the wedge clock counts in.
	sampled := p.start
	for {
		// A restart can come due in this run only if it fits before the deadline less
		// two reserves (to persist, and for a restart's reads, as slow as this pass's
		// observations): else the deadline would lose it. The next run goes on.
		left := time.Duration(math.MaxInt64)
		if deadline, ok := p.ctx.Deadline(); ok {
			r := reserve(p.start, deadline)
			left = deadline.Sub(p.Clock.Now()) - r - max(r, 2*p.slowest)
		}
		weighed := p.Clock.Since(p.start) >= p.Decide.ConfirmWindow+p.SampleInterval
		sampleOn, cutShort := false, false
		for _, t := range p.res.Targets {
			if t.SamplesOn(p.SampleInterval, left) || (unweighed[t.UID] && !weighed && p.SampleInterval <= left) {
				sampleOn = true
			} else if t.Confirming && t.Action == state.ActionWait {
				cutShort = true
			}
		}
		if !sampleOn {
			if cutShort {
				p.warn("confirmation cut short", "the run deadline cut confirmation short; the next run continues it")
			}
			return
		}
		p.Log.Info().Str("verdict", string(p.res.Verdict)).Str("reason", p.res.Reason).Dur("in", p.SampleInterval).Msg("sampling again to confirm")
		if wait := p.SampleInterval - p.Clock.Since(sampled); wait > 0 {
			select {
			case <-p.ctx.Done():
				return
			case <-p.Clock.After(wait):
			}
		}
		sampled = p.Clock.Now()
		obs, err := p.observe(p.Observer.Observe)
		if err != nil { // neither ends the run nor counts as seen: a gap the next sample settles
			p.warn("sample failed", fmt.Sprintf("a sample failed, sampling on: %v", err))
			obs = decide.Unseen(p.obs, sampled, err)
		} else {
			p.rep.Samples++
		}
		p.obs = obs
		p.decide(p.next)
	}
}

func (r *Runner) lastRun(start time.Time, res decide.Result, err error) *state.Run {
	run := &state.Run{At: start.UTC(), Took: state.Duration(r.Clock.Since(start).Round(time.Millisecond)),
		Verdict: res.Verdict, Action: res.Action, Reason: state.Truncate(res.Reason, 500), Outcome: state.RunOK,
		Watchdog: r.Source.Version, Shadow: r.Mode == state.ModeShadow}
	if res.Pause != nil {
		run.Paused = state.Truncate(res.Pause.String(), 700)
	}
	if err != nil {
		run.Outcome, run.Error = state.RunError, state.Truncate(err.Error(), 500)
	}
	return run
}

func observationError(obs decide.Observation) error {
	failed := func(what string, err error) error { return &Error{Step: Step{what, StepObserve.Category}, Err: err} }
	switch {
	case obs.ExpectedErr != nil:
		return failed("count serving nodes", obs.ExpectedErr)
	case obs.Leader != nil && obs.Leader.Err != nil:
		return failed("read leader Lease", obs.Leader.Err)
	case obs.Ownership != nil && obs.Ownership.Err != nil:
		return failed("read the scheduler Deployment's pods", obs.Ownership.Err)
	case obs.Rollout != nil && obs.Rollout.Err != nil:
		return failed("read scheduler Deployment", obs.Rollout.Err)
	case obs.Rollout != nil && obs.Rollout.OwnersErr != nil:
		return failed("read scheduler ReplicaSet", obs.Rollout.OwnersErr)
	}
	return nil
}

func (p *pass) logDecision() {
	for _, t := range p.res.Targets {
		for _, w := range t.Warnings {
			p.warn("doubt about the observation", t.Pod+": "+w)
		}
		ev := p.Log.Info()
		if t.Verdict == state.VerdictWedged || t.Verdict == state.VerdictDegraded || t.Verdict == state.VerdictUnknown {
			ev = p.Log.Warn()
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
