// Package loop runs the watchdog continuously (`watchdog run`): the same pass as
// `watchdog check` on an interval, with Prometheus metrics of its own and a health
// endpoint that fails when passes stop completing.
package loop

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
	"k8s.io/utils/clock"

	"github.com/agentenv/watchdog/pkg/check"
)

// Pass is one watchdog pass (check.Runner.Run).
type Pass func(ctx context.Context) (*check.Report, error)

// Loop runs passes every Interval, each bounded by Timeout.
type Loop struct {
	Interval time.Duration
	Timeout  time.Duration
	Pass     Pass
	Clock    clock.Clock
	Log      zerolog.Logger
	Metrics  *Metrics

	mu          sync.Mutex
	started     time.Time
	leading     bool
	leadSince   time.Time // start of the current term as leader
	lastSuccess time.Time
	lastAlive   time.Time // last pass end or election attempt: the loop is alive
	lastErr     string
}

// New returns a loop whose health clock starts now.
func New(interval, timeout time.Duration, pass Pass, clk clock.Clock, log zerolog.Logger) *Loop {
	now := clk.Now()
	return &Loop{Interval: interval, Timeout: timeout, Pass: pass, Clock: clk, Log: log, Metrics: NewMetrics(), started: now, lastAlive: now}
}

// Lead runs passes until ctx ends (leadership lost or shutdown). A pass in flight
// when ctx ends is cancelled; a restart it had claimed but not finished is
// completed by the next pass, from the state ConfigMap.
func (l *Loop) Lead(ctx context.Context) {
	l.setLeading(true)
	defer l.setLeading(false)
	for {
		start := l.Clock.Now()
		l.runPass(ctx)
		if ctx.Err() != nil {
			return
		}
		wait := l.Interval - l.Clock.Since(start)
		if wait < 0 {
			wait = 0
		}
		select {
		case <-ctx.Done():
			return
		case <-l.Clock.After(wait):
		}
	}
}

func (l *Loop) runPass(ctx context.Context) {
	pctx, cancel := context.WithTimeout(ctx, l.Timeout)
	defer cancel()
	start := l.Clock.Now()
	rep, err := l.Pass(pctx)
	took := l.Clock.Since(start)
	now := l.Clock.Now()
	l.Metrics.Observe(rep, err, took, now)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lastAlive = now
	if errors.Is(err, check.ErrInterrupted) {
		l.Log.Info().Err(err).Dur("took", took).Msg("pass cut short: leadership lost or shutting down")
		return
	}
	if err != nil {
		l.lastErr = err.Error()
		l.Log.Error().Err(err).Dur("took", took).Msg("pass failed")
		return
	}
	l.lastSuccess, l.lastErr = now, ""
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

// Alive records a sign of life from a standby (an election attempt).
func (l *Loop) Alive() {
	l.mu.Lock()
	l.lastAlive = l.Clock.Now()
	l.mu.Unlock()
}

// Staleness is how long health tolerates no completed pass: two intervals plus
// a pass that used its whole timeout.
func (l *Loop) Staleness() time.Duration { return 2*l.Interval + l.Timeout }

// Healthy reports whether the watchdog is doing its job: as leader, a pass
// succeeded within Staleness (or it is still within its first Staleness); as a
// standby, its election loop is alive.
func (l *Loop) Healthy() (bool, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.Clock.Now()
	limit := l.Staleness()
	if !l.leading {
		if now.Sub(l.lastAlive) > limit {
			return false, fmt.Sprintf("standby: no election attempt for %s", now.Sub(l.lastAlive).Round(time.Second))
		}
		return true, "standby"
	}
	// A new term starts a fresh health clock: a standby that just won the
	// election has had no chance to complete a pass yet, and a pass it completed
	// in an earlier term says nothing about this one.
	last := l.lastSuccess
	if last.IsZero() {
		last = l.started
	}
	if last.Before(l.leadSince) {
		last = l.leadSince
	}
	if age := now.Sub(last); age > limit {
		msg := fmt.Sprintf("leader: no pass completed for %s (limit %s)", age.Round(time.Second), limit)
		if l.lastErr != "" {
			msg += "; last error: " + l.lastErr
		}
		return false, msg
	}
	return true, "leader: last pass completed " + now.Sub(last).Round(time.Second).String() + " ago"
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

// Metrics are the watchdog's own metrics.
type Metrics struct {
	Registry     *prometheus.Registry
	verdict      *prometheus.GaugeVec
	ready        *prometheus.GaugeVec
	expected     *prometheus.GaugeVec
	restarts     *prometheus.CounterVec
	wouldRestart prometheus.Counter
	alerts       *prometheus.CounterVec
	scrapeErrors *prometheus.CounterVec
	passes       *prometheus.CounterVec
	lastSuccess  prometheus.Gauge
	duration     prometheus.Histogram
	leader       prometheus.Gauge
}

// NewMetrics registers the metrics in a registry of their own.
func NewMetrics() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		verdict: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "agentenv_watchdog_pod_verdict",
			Help: "1 for the verdict of each judged scheduler pod in the last pass."}, []string{"pod", "verdict"}),
		ready: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "agentenv_watchdog_pod_ready_nodes",
			Help: "Nodes each judged scheduler pod counted ready (its agentenv_scheduler_observed_nodes{status=\"ready\"}) in the last pass; absent when unknown."}, []string{"pod"}),
		expected: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "agentenv_watchdog_pod_expected_nodes",
			Help: "Serving nodes the API server lists for each judged scheduler pod in the last pass (what ready should be); absent when unknown."}, []string{"pod"}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentenv_watchdog_restarts_total",
			Help: "Restarts carried out, by outcome (done, failed)."}, []string{"outcome"}),
		wouldRestart: prometheus.NewCounter(prometheus.CounterOpts{Name: "agentenv_watchdog_would_restarts_total",
			Help: "Restarts shadow mode (--shadow) recorded instead of making, one per episode."}),
		alerts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentenv_watchdog_alerts_total",
			Help: "Alert deliveries, by event, sink and result (ok, failed)."}, []string{"event", "sink", "result"}),
		scrapeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentenv_watchdog_scrape_errors_total",
			Help: "Scheduler metrics scrapes that could not be trusted, by kind."}, []string{"kind"}),
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentenv_watchdog_passes_total",
			Help: "Passes run, by result (ok, error, interrupted)."}, []string{"result"}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{Name: "agentenv_watchdog_last_successful_pass_timestamp_seconds",
			Help: "Unix time of the last pass that completed without error."}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "agentenv_watchdog_pass_duration_seconds",
			Help: "Duration of passes (long ones are confirming a wedge).", Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15, 30, 60, 120, 180}}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "agentenv_watchdog_leader",
			Help: "1 while this instance is the elected leader and runs passes."}),
	}
	m.Registry.MustRegister(m.verdict, m.ready, m.expected, m.restarts, m.wouldRestart, m.alerts, m.scrapeErrors, m.passes, m.lastSuccess, m.duration, m.leader)
	return m
}

// SetLeader records leadership.
func (m *Metrics) SetLeader(leading bool) {
	if leading {
		m.leader.Set(1)
	} else {
		m.leader.Set(0)
	}
}

// Observe records a pass.
func (m *Metrics) Observe(rep *check.Report, err error, took time.Duration, now time.Time) {
	m.duration.Observe(took.Seconds())
	if errors.Is(err, check.ErrInterrupted) {
		m.passes.WithLabelValues("interrupted").Inc()
	} else if err != nil {
		m.passes.WithLabelValues("error").Inc()
	} else {
		m.passes.WithLabelValues("ok").Inc()
		m.lastSuccess.Set(float64(now.UnixNano()) / 1e9)
	}
	if rep == nil {
		return
	}
	m.verdict.Reset()
	m.ready.Reset()
	m.expected.Reset()
	for _, t := range rep.Targets {
		if t.Judged {
			m.verdict.WithLabelValues(t.Pod, string(t.Verdict)).Set(1)
			if t.Ready != nil {
				m.ready.WithLabelValues(t.Pod).Set(float64(*t.Ready))
			}
			if t.Expected != nil {
				m.expected.WithLabelValues(t.Pod).Set(float64(*t.Expected))
			}
		}
		if t.ScrapeKind != "" {
			m.scrapeErrors.WithLabelValues(t.ScrapeKind).Inc()
		}
	}
	for _, r := range rep.Restarts {
		m.restarts.WithLabelValues(string(r.Outcome)).Inc()
	}
	m.wouldRestart.Add(float64(len(rep.WouldRestarts)))
	for _, a := range rep.Alerts {
		if a.DryRun {
			continue
		}
		result := "ok"
		if !a.OK {
			result = "failed"
		}
		m.alerts.WithLabelValues(a.Event, a.Sink, result).Inc()
	}
}
