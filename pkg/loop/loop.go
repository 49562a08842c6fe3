// Package loop runs `watchdog check`'s pass on an interval (`watchdog run`), with metrics
// of its own and a health endpoint that fails when passes stop completing.
package loop

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
	"k8s.io/utils/clock"

	"github.com/agentenv/watchdog/pkg/check"
	"github.com/agentenv/watchdog/pkg/metrics"
)

// Loop runs passes every Interval, each bounded by Timeout.
type Loop struct {
	Interval, Timeout time.Duration
	Pass              func(ctx context.Context) (*check.Report, error) // check.Runner.Run
	Clock             clock.Clock
	Log               zerolog.Logger
	Metrics           *metrics.Metrics
	// Wake asks for an early pass: the nodes changed (pkg/slicewatch), new ones may be rejected now.
	// Settle is how long that pass waits for the rest of the burst (a roll changes slices one by one).
	Wake   <-chan struct{}
	Settle time.Duration
	// DryRun passes write no state, so a standby cannot see them: no-pass-anywhere is skipped.
	DryRun bool

	mu          sync.Mutex
	leading     bool
	leadSince   time.Time // start of the current term as leader
	lastSuccess time.Time
	lastAlive   time.Time // last pass end or election attempt: the loop is alive
	lastErr     string
	lastAnyPass time.Time // last pass completed by any replica, as this one saw it
	stateErr    string    // why the state ConfigMap could not be read last, "" if it was
}

// New returns a loop whose health clock starts now, recording its passes in m.
func New(interval, timeout time.Duration, pass func(context.Context) (*check.Report, error), m *metrics.Metrics, clk clock.Clock, log zerolog.Logger) *Loop {
	return &Loop{Interval: interval, Timeout: timeout, Pass: pass, Clock: clk, Log: log, Metrics: m, lastAlive: clk.Now(), lastAnyPass: clk.Now()}
}

// Lead runs passes until ctx ends (leadership lost or shutdown), cancelling the one
// in flight: the next pass completes a restart it claimed, from the state ConfigMap.
func (l *Loop) Lead(ctx context.Context) {
	l.setLeading(true)
	defer l.setLeading(false)
	for {
		start := l.Clock.Now()
		l.runPass(ctx)
		if ctx.Err() != nil || !l.waitNext(ctx, start) {
			return
		}
	}
}

// waitNext waits until the next pass is due (schedule); false when ctx ended.
func (l *Loop) waitNext(ctx context.Context, start time.Time) bool {
	s := schedule{interval: l.Interval, settle: l.Settle, start: start}
	for {
		select {
		case <-ctx.Done():
			return false
		case <-l.Wake:
			if s.changed(l.Clock.Now()) {
				l.Log.Info().Dur("in", max(s.due().Sub(l.Clock.Now()), 0)).Msg("the nodes' EndpointSlices changed: early pass")
			}
		case <-l.Clock.After(max(s.due().Sub(l.Clock.Now()), 0)):
			return true
		}
	}
}

// schedule is when the pass after the one started at start is due: interval after
// it, or settle after a change of the nodes' EndpointSlices, but no sooner than half
// an interval after start (a stream of changes at most doubles the passes).
type schedule struct {
	interval, settle time.Duration
	start, early     time.Time
}

func (s *schedule) due() time.Time {
	if next := s.start.Add(s.interval); s.early.IsZero() || !s.early.Before(next) {
		return next
	}
	return s.early
}

// changed records a change seen at now, reporting whether it brings the next pass
// forward (the first change after a pass; later ones join its burst).
func (s *schedule) changed(now time.Time) bool {
	if !s.early.IsZero() {
		return false
	}
	s.early = now.Add(s.settle)
	if floor := s.start.Add(s.interval / 2); s.early.Before(floor) {
		s.early = floor
	}
	return s.early.Before(s.start.Add(s.interval))
}

func (l *Loop) runPass(ctx context.Context) {
	pctx, cancel := context.WithTimeout(ctx, l.Timeout)
	defer cancel()
	start := l.Clock.Now()
	rep, err := l.Pass(pctx)
	took := l.Clock.Since(start)
	now := l.Clock.Now()
	if rep == nil || !rep.Skipped { // another pass held the Lease: nothing to count
		l.Metrics.Observe(rep, err, took, now)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lastAlive = now
	switch {
	case errors.Is(err, check.ErrInterrupted):
		l.Log.Info().Err(err).Dur("took", took).Msg("pass cut short: leadership lost or shutting down")
	case err != nil:
		l.lastErr = err.Error()
		l.Log.Error().Err(err).Dur("took", took).Msg("pass failed")
	default:
		l.lastSuccess, l.lastAnyPass, l.lastErr = now, now, ""
	}
}

func (l *Loop) setLeading(leading bool) {
	l.mu.Lock()
	l.leading = leading
	l.lastAlive = l.Clock.Now()
	if leading {
		l.leadSince = l.lastAlive
	}
	l.mu.Unlock()
	l.Metrics.SetLeader(leading)
}

// SawPass records a pass completed anywhere (a standby saw the state written).
func (l *Loop) SawPass() {
	l.mu.Lock()
	l.lastAnyPass = l.Clock.Now()
	l.mu.Unlock()
}

// SawState records whether a standby could read the state ConfigMap (err nil).
func (l *Loop) SawState(err error) {
	l.mu.Lock()
	l.stateErr = ""
	if err != nil {
		l.stateErr = err.Error()
	}
	l.mu.Unlock()
}

// Alive records a sign of life from a standby (an election attempt).
func (l *Loop) Alive() {
	l.mu.Lock()
	l.lastAlive = l.Clock.Now()
	l.mu.Unlock()
}

// Staleness is how long health tolerates no completed pass: two intervals and a timeout.
func (l *Loop) Staleness() time.Duration { return 2*l.Interval + l.Timeout }

// Healthy reports whether the watchdog does its job: as leader, a pass succeeded within Staleness of
// now or of the term's start; as a standby, its election loop is alive and some replica completed a
// pass within Staleness. agentenv_watchdog_unhealthy says why not.
func (l *Loop) Healthy() (bool, string) {
	l.mu.Lock() // the gauge's Reset and Set too: /healthz and watchPasses both call it
	defer l.mu.Unlock()
	ok, reason, msg := l.health()
	l.Metrics.SetUnhealthy(reason)
	return ok, msg
}

// health is Healthy's verdict; l.mu held.
func (l *Loop) health() (ok bool, reason, msg string) {
	now := l.Clock.Now()
	limit := l.Staleness()
	if !l.leading {
		switch {
		case now.Sub(l.lastAlive) > limit:
			return false, "no-election-attempt", fmt.Sprintf("standby: no election attempt for %s", now.Sub(l.lastAlive).Round(time.Second))
		case l.DryRun || now.Sub(l.lastAnyPass) <= limit:
		case l.stateErr != "":
			return false, "state-unreadable", fmt.Sprintf("standby: no pass seen for %s (limit %s): the state ConfigMap cannot be read: %s", now.Sub(l.lastAnyPass).Round(time.Second), limit, l.stateErr)
		default:
			return false, "no-pass-anywhere", fmt.Sprintf("standby: no pass completed anywhere for %s (limit %s): the leader holds the Lease but passes nothing", now.Sub(l.lastAnyPass).Round(time.Second), limit)
		}
		return true, "", "standby"
	}
	// A new term starts a fresh health clock: an earlier term's pass says nothing of this one.
	last := l.lastSuccess
	if last.Before(l.leadSince) {
		last = l.leadSince
	}
	if age := now.Sub(last); age > limit {
		msg := fmt.Sprintf("leader: no pass completed for %s (limit %s)", age.Round(time.Second), limit)
		if l.lastErr != "" {
			msg += "; last error: " + l.lastErr
		}
		return false, "no-pass", msg
	}
	return true, "", "leader: last pass completed " + now.Sub(last).Round(time.Second).String() + " ago"
}

// Handler serves /metrics and /healthz.
func (l *Loop) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(l.Metrics.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		ok, msg := l.Healthy()
		if !ok {
			http.Error(w, msg, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok:", msg)
	})
	return mux
}
