// Package backtest replays recorded Prometheus history through the watchdog's own
// pass (pkg/check's Runner) at simulated times, beside the stop-gap script and the
// history as recorded. Fetch (history.go) reads the history; build (world.go)
// makes a World of it once, a Target per scheduler pod; Run (sim.go) replays it in
// three columns (column.go) with the watchdog's, the stop-gap's and nobody's
// restarts; report.go prints what each did.
package backtest

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/rs/zerolog"
	"k8s.io/utils/ptr"

	"github.com/agentenv/watchdog/internal/autoclock"
	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/check"
	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/restart"
	"github.com/agentenv/watchdog/pkg/state"
	"github.com/agentenv/watchdog/pkg/statestore"
)

// Config is how the simulated watchdog runs.
type Config struct {
	Check      check.Options
	Deployment string
	// Timeout is each pass's deadline, in simulated time.
	Timeout time.Duration
	// Schedule and ScheduleSpec simulate the CronJob; Interval > 0, `watchdog run`.
	Schedule     cron.Schedule
	ScheduleSpec string
	Interval     time.Duration
	// StopGap is the stop-gap script's schedule, and how long it lets ready stay 0.
	StopGap      cron.Schedule
	StopGapAfter time.Duration
	Log          zerolog.Logger
}

// Run replays h through the watchdog's pass and the stop-gap script.
func Run(ctx context.Context, h *History, cfg Config) (*Result, error) {
	w, err := build(h, cfg)
	if err != nil {
		return nil, err
	}
	res := &Result{From: h.From.UTC(), To: h.To.UTC(), ScrapeInterval: state.Duration(w.interval), Step: state.Duration(w.Step),
		Warnings: w.Warnings, Assumed: assumptions(w, cfg), Mode: fmt.Sprintf("CronJob schedule %q", cfg.ScheduleSpec),
		// Lists print [], not null, in JSON.
		Episodes: []Episode{}, Restarts: []Restart{}, Blocked: []Blocked{}, Pages: []Page{}}
	for _, t := range w.Targets {
		res.Pods = append(res.Pods, t.Pod)
	}
	if cfg.Interval > 0 {
		res.Mode = fmt.Sprintf("watchdog run --interval %s", cfg.Interval)
	}
	sim := &simulation{cfg: cfg, col: w.column(), clock: autoclock.New(w.From)}
	sim.store = &statestore.MemoryStore{Namespace: cfg.Check.Source.Namespace, Name: cfg.Check.StateConfigMap}
	sim.store.SetData(map[string]string{}) // an empty state, as after install: no "not found" warning
	opts := cfg.Check
	opts.Mode = state.ModeLive // restarts are made on the column, alerts recorded
	sim.runner = &check.Runner{Options: opts, Observer: sim, Store: sim.store, Restarter: sim,
		Sinks: []alert.Sink{sim}, Clock: sim.clock, Log: cfg.Log}
	if err := sim.run(ctx, res); err != nil {
		return nil, err
	}
	res.Summary.WorldSummary = sim.col.summary()
	res.StopGap = runStopGap(w, cfg)
	res.AsRecorded = w.column().summary()
	res.Summary.Runs, res.Summary.Blocked, res.Summary.Alerts = res.Runs, len(res.Blocked), len(res.Pages)
	res.Summary.Pages = len(slices.DeleteFunc(slices.Clone(res.Pages),
		func(p Page) bool { return p.Severity != alert.SeverityCritical }))
	return res, nil
}

// simulation is check's Runner whose observer, restarter and alert sink answer from a column at the
// simulated time and record what each pass did (the Runner calls them from the pass's goroutine).
type simulation struct {
	cfg    Config
	col    *column
	clock  *autoclock.Clock
	store  *statestore.MemoryStore
	runner *check.Runner
	made   []Restart
	notes  []alert.Notification
}

// run performs the passes over the range: on the CronJob's schedule, a run
// still going skipping it (concurrencyPolicy: Forbid), or every Interval.
func (s *simulation) run(ctx context.Context, res *Result) error {
	next := s.col.From
	if s.cfg.Interval <= 0 {
		next = s.cfg.Schedule.Next(s.col.From.Add(-time.Second))
	}
	seen, st := map[string]bool{}, &state.State{}
	for !next.After(s.col.To) {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("backtest stopped at %s: %w", next.Format(time.RFC3339), err)
		}
		s.clock.SetTime(next)
		rep, err := s.runner.Run(deadlineContext{Context: ctx, at: next.Add(s.cfg.Timeout)})
		res.Runs++
		s.record(res, next, rep, err)
		if st, err = s.collectEpisodes(ctx, res, seen); err != nil {
			return err
		}
		if end := s.clock.Now(); s.cfg.Interval > 0 {
			next = slices.MaxFunc([]time.Time{next.Add(s.cfg.Interval), end}, time.Time.Compare)
		} else {
			next = s.cfg.Schedule.Next(slices.MaxFunc([]time.Time{next, end}, time.Time.Compare))
		}
	}
	for uid, p := range st.Pods {
		if e := p.Episode; e != nil {
			res.Episodes = append(res.Episodes, Episode{Pod: p.Name, UID: uid, Kind: e.Kind, Evidence: e.Evidence, From: e.Since, Outcome: episodeOpen})
		}
	}
	slices.SortStableFunc(res.Episodes, func(a, b Episode) int { return a.From.Compare(b.From) })
	return nil
}

// record adds one pass's restarts, blocked restarts, alerts and warnings to res.
func (s *simulation) record(res *Result, run time.Time, rep *check.Report, runErr error) {
	made, notes := s.made, s.notes
	s.made, s.notes = nil, nil
	if runErr != nil {
		res.Warnings = append(res.Warnings, fmt.Sprintf("run at %s failed: %v", run.UTC().Format(time.RFC3339), runErr))
	}
	// The Runner returns its report, filled as far as the pass got, also on error.
	for _, r := range made {
		r.Run = run.UTC()
		if i := slices.IndexFunc(rep.Targets, func(t decide.Target) bool { return t.UID == r.UID }); i >= 0 {
			t := rep.Targets[i]
			r.Evidence, r.Reason, r.Gates = string(t.Evidence), t.Reason, decide.GateSummary(t)
			if t.BadSince != nil {
				since := t.BadSince.UTC()
				r.EpisodeStart, r.AfterEpisodeStart = &since, state.Duration(r.At.Sub(since))
			}
		}
		res.Restarts = append(res.Restarts, r)
	}
	for _, t := range rep.Targets {
		if t.Action != state.ActionBlocked || t.RestartInProgress() {
			continue
		}
		// The gates that refused it (at least one: it is blocked, not in progress).
		refused := slices.DeleteFunc(slices.Clone(t.Gates), func(g decide.Gate) bool { return g.OK || g.InProgress })
		res.Blocked = append(res.Blocked, Blocked{At: s.clock.Now().UTC(), Run: run.UTC(), Pod: t.Pod, Reason: t.Reason, Gates: refused})
	}
	for _, w := range rep.Warnings {
		res.Warnings = appendOnce(res.Warnings, w)
	}
	for _, n := range notes {
		res.Pages = append(res.Pages, Page{At: n.Time, Run: run.UTC(), Event: n.Event, Severity: n.Severity, Pod: n.Pod, Reminder: n.Reminder, Reason: n.Reason})
	}
}

// collectEpisodes adds the episodes closed since the last call (the state keeps
// only the latest) and returns the state.
func (s *simulation) collectEpisodes(ctx context.Context, res *Result, seen map[string]bool) (*state.State, error) {
	st, err := s.store.Load(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the simulated state: %w", err)
	}
	for _, e := range st.State.Episodes {
		if key := e.UID + "|" + e.From.String(); !seen[key] {
			seen[key] = true
			res.Episodes = append(res.Episodes, Episode{Pod: e.Pod, UID: e.UID, Kind: e.Kind, Evidence: e.Evidence, From: e.From, To: ptr.To(e.To),
				Duration: state.Duration(e.To.Sub(e.From)), Outcome: e.Outcome})
		}
	}
	return st.State, nil
}

// deadlineContext carries a pass's deadline in simulated time, never reached in real time.
type deadlineContext struct {
	context.Context
	at time.Time
}

func (c deadlineContext) Deadline() (time.Time, bool) { return c.at, true }

func (s *simulation) Observe(ctx context.Context) (decide.Observation, error) {
	return s.col.observation(s.clock.Now()), ctx.Err()
}

func (s *simulation) ObserveConsistent(ctx context.Context) (decide.Observation, error) {
	obs, err := s.Observe(ctx)
	obs.Consistent = true
	return obs, err
}

// Rollout: the Deployment is taken as found, not rolling out, owning the pods.
func (s *simulation) Rollout(_ context.Context, pods ...decide.Pod) *decide.Rollout {
	return &decide.Rollout{Name: s.col.deployment, UID: "backtest", Found: true, Owners: assumedChains(s.col.deployment, pods)}
}

// assumedChains owns every pod named as the Deployment's (not a canary's).
func assumedChains(deployment string, pods []decide.Pod) map[string]decide.OwnerChain {
	chains := make(map[string]decide.OwnerChain, len(pods))
	for _, p := range pods {
		if decide.OwnedByName(p, deployment) {
			chains[p.UID] = decide.OwnerChain{Verified: true, ReplicaSetUID: replicaSetUID, Detail: "not in the recorded history: assumed from the pod's name"}
		}
	}
	return chains
}

func (s *simulation) Method() string { return s.cfg.Check.Decide.RestartMethod }

// Restart makes the restart in the world and records it.
func (s *simulation) Restart(_ context.Context, name, uid string) (restart.Result, error) {
	now := s.clock.Now()
	if !s.col.Restart(uid, now) {
		return restart.Result{Gone: true, Detail: fmt.Sprintf("backtest: pod %s already gone", name)}, nil
	}
	s.made = append(s.made, Restart{At: now.UTC(), Pod: name, UID: uid})
	return restart.Result{Detail: fmt.Sprintf("backtest: restarted pod %s in the simulation (nothing was touched)", name)}, nil
}

func (s *simulation) Name() string { return "backtest" }

// Send records an alert of the pass.
func (s *simulation) Send(_ context.Context, n alert.Notification) error {
	s.notes = append(s.notes, n)
	return nil
}

// runStopGap replays the stop-gap script on its own column; a gap clears a pod's
// count, as the script's failed curl does.
func runStopGap(w *World, cfg Config) StopGap {
	c := w.column()
	out := StopGap{After: state.Duration(cfg.StopGapAfter), Restarts: []StopGapRestart{}}
	zeroSince := map[string]time.Time{}
	for t := cfg.StopGap.Next(w.From.Add(-time.Second)); !t.After(w.To); t = cfg.StopGap.Next(t) {
		for _, p := range c.Pods(t) {
			switch since, ok := zeroSince[p.UID]; {
			case p.ScrapeErr != nil || p.ReadyNodes != 0:
				delete(zeroSince, p.UID)
			case !ok:
				zeroSince[p.UID] = t
			case t.Sub(since) >= cfg.StopGapAfter && c.Restart(p.UID, t):
				out.Restarts = append(out.Restarts, StopGapRestart{At: t.UTC(), Pod: p.Name, ZeroSince: since.UTC()})
				delete(zeroSince, p.UID)
			}
		}
	}
	out.Summary = c.summary()
	return out
}

// assumptions are what the history cannot show and the replay takes as passing.
func assumptions(w *World, cfg Config) []string {
	out := []string{
		fmt.Sprintf("Deployment %s exists and is not rolling out, except that a pod whose series ended just after a newer pod of the Deployment started is terminating from that start", cfg.Deployment),
		fmt.Sprintf("every pod named %s-<hash>-<suffix> is the Deployment's (the owner chain and the rollout gate pass for it)", cfg.Deployment),
		"the consistent re-read before a restart agrees with the listing",
		"a restart heals: the replacement reads as many ready nodes as serve until the recorded pod heals by itself",
	}
	if cfg.Check.Decide.LeaderLease != "" && w.leaderFromReadiness {
		out = append(out, fmt.Sprintf("Lease %s is held by the pod recorded ready (readiness is leadership)", cfg.Check.Decide.LeaderLease))
	}
	return out
}
