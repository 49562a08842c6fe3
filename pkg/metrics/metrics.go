// Package metrics holds the watchdog's own Prometheus metrics, the same families for
// `watchdog run` (served) and `watchdog check` (pushed), so one set of rules and
// dashboards reads either (docs/monitoring.md, "Counters in each mode").
package metrics

import (
	"errors"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/check"
	"github.com/agentenv/watchdog/pkg/deliver"
	"github.com/agentenv/watchdog/pkg/scrape"
	"github.com/agentenv/watchdog/pkg/state"
	"github.com/agentenv/watchdog/pkg/version"
)

// Options say what the registry holds beyond the watchdog's families.
type Options struct {
	Sinks   []string // configured alert sinks: the delivery counter starts at 0 for each
	Runtime bool     // adds the Go and process collectors (useless for a one-shot run)
}

// Metrics are the watchdog's own metrics.
type Metrics struct {
	Registry                                                     *prometheus.Registry
	verdict, ready, expected, passVerdict, passAction, unhealthy *prometheus.GaugeVec
	restarts, alerts, scrapeErrors, passes                       *prometheus.CounterVec
	lastSuccess, lastPass, leader                                prometheus.Gauge
	wouldRestart                                                 prometheus.Counter
	duration                                                     prometheus.Histogram
}

// New registers the metrics in a registry of their own, every counter present at 0.
func New(o Options) *Metrics {
	reg := prometheus.NewRegistry()
	f := promauto.With(reg)
	m := &Metrics{
		Registry: reg,
		verdict: f.NewGaugeVec(prometheus.GaugeOpts{Name: "agentenv_watchdog_pod_verdict",
			Help: "1 for the verdict of each judged scheduler pod in the last pass."}, []string{"pod", "verdict"}),
		ready: f.NewGaugeVec(prometheus.GaugeOpts{Name: "agentenv_watchdog_pod_ready_nodes",
			Help: "Nodes each judged scheduler pod counted ready (its agentenv_scheduler_observed_nodes{status=\"ready\"}) in the last pass; absent when unknown."}, []string{"pod"}),
		expected: f.NewGaugeVec(prometheus.GaugeOpts{Name: "agentenv_watchdog_pod_expected_nodes",
			Help: "Serving nodes the API server lists for each judged scheduler pod in the last pass (what ready should be); absent when unknown."}, []string{"pod"}),
		restarts: f.NewCounterVec(prometheus.CounterOpts{Name: "agentenv_watchdog_restarts_total",
			Help: "Restarts carried out, by outcome (done, failed)."}, []string{"outcome"}),
		wouldRestart: f.NewCounter(prometheus.CounterOpts{Name: "agentenv_watchdog_would_restarts_total",
			Help: "Restarts shadow mode (--shadow) recorded instead of making, one per episode."}),
		alerts: f.NewCounterVec(prometheus.CounterOpts{Name: "agentenv_watchdog_alerts_total",
			Help: "Alert deliveries, by event, sink and result (ok, failed)."}, []string{"event", "sink", "result"}),
		scrapeErrors: f.NewCounterVec(prometheus.CounterOpts{Name: "agentenv_watchdog_scrape_errors_total",
			Help: "Scheduler metrics scrapes that could not be trusted, by kind."}, []string{"kind"}),
		passes: f.NewCounterVec(prometheus.CounterOpts{Name: "agentenv_watchdog_passes_total",
			Help: "Passes run, by result (ok, error, interrupted)."}, []string{"result"}),
		lastSuccess: f.NewGauge(prometheus.GaugeOpts{Name: "agentenv_watchdog_last_successful_pass_timestamp_seconds",
			Help: "Unix time of the last pass that completed without error."}),
		lastPass: f.NewGauge(prometheus.GaugeOpts{Name: "agentenv_watchdog_last_pass_timestamp_seconds",
			Help: "Unix time the last pass ended, whatever its outcome."}),
		passVerdict: f.NewGaugeVec(prometheus.GaugeOpts{Name: "agentenv_watchdog_last_pass_verdict",
			Help: "1 for the overall verdict of the last pass that reached one."}, []string{"verdict"}),
		passAction: f.NewGaugeVec(prometheus.GaugeOpts{Name: "agentenv_watchdog_last_pass_action",
			Help: "1 for what the last pass that reached a decision did (none, wait, restart, blocked)."}, []string{"action"}),
		duration: f.NewHistogram(prometheus.HistogramOpts{Name: "agentenv_watchdog_pass_duration_seconds",
			Help: "Duration of passes (long ones are confirming a wedge).", Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15, 30, 60, 120, 180}}),
		unhealthy: f.NewGaugeVec(prometheus.GaugeOpts{Name: "agentenv_watchdog_unhealthy",
			Help: "1 for why /healthz fails (no-pass, no-election-attempt, no-pass-anywhere but not in dry run, state-unreadable); no series while it passes"}, []string{"reason"}),
		leader: f.NewGauge(prometheus.GaugeOpts{Name: "agentenv_watchdog_leader",
			Help: "1 while this instance is the elected leader and runs passes."}),
	}
	f.NewGaugeVec(prometheus.GaugeOpts{Name: "agentenv_watchdog_build_info",
		Help: "1, labelled with the watchdog's version, commit and Go version."}, []string{"version", "commit", "goversion"}).
		WithLabelValues(version.Version, version.Commit, runtime.Version()).Set(1)
	if o.Runtime {
		m.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}

	// Every counter starts at 0: increase() needs a sample before the first event,
	// and a dashboard shows 0, not "no data".
	for _, o := range []state.RestartOutcome{state.RestartDone, state.RestartFailed} {
		m.restarts.WithLabelValues(string(o))
	}
	for _, r := range []string{"ok", "error", "interrupted"} {
		m.passes.WithLabelValues(r)
	}
	for _, k := range scrape.Kinds {
		m.scrapeErrors.WithLabelValues(string(k))
	}
	sinks := append([]string{deliver.KubernetesEvent}, o.Sinks...)
	for _, e := range alert.Events {
		if e.Name == alert.EventTest {
			continue // notify test runs no pass
		}
		for _, s := range sinks {
			for _, r := range deliveryResult {
				m.alerts.WithLabelValues(e.Name, s, r)
			}
		}
	}
	return m
}

// SetUnhealthy records why /healthz fails ("" while it passes).
func (m *Metrics) SetUnhealthy(reason string) {
	m.unhealthy.Reset()
	if reason != "" {
		m.unhealthy.WithLabelValues(reason).Set(1)
	}
}

// SetLeader records leadership: 1 while leading, else 0.
func (m *Metrics) SetLeader(leading bool) {
	v := 0.0
	if leading {
		v = 1
	}
	m.leader.Set(v)
}

// Observe records a pass that took took and ended at now, its report (nil if none) and error.
func (m *Metrics) Observe(rep *check.Report, err error, took time.Duration, now time.Time) {
	m.duration.Observe(took.Seconds())
	m.lastPass.Set(float64(now.UnixNano()) / 1e9)
	switch {
	case errors.Is(err, check.ErrInterrupted):
		m.passes.WithLabelValues("interrupted").Inc()
	case err != nil:
		m.passes.WithLabelValues("error").Inc()
	default:
		m.passes.WithLabelValues("ok").Inc()
		m.lastSuccess.Set(float64(now.UnixNano()) / 1e9)
	}
	if rep == nil {
		return
	}
	// The last pass that reached a verdict or action: its one series at 1.
	for g, v := range map[*prometheus.GaugeVec]string{m.passVerdict: string(rep.Verdict), m.passAction: string(rep.Action)} {
		if v != "" {
			g.Reset()
			g.WithLabelValues(v).Set(1)
		}
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
		if !a.DryRun && !a.Dropped {
			m.alerts.WithLabelValues(a.Event, a.Sink, deliveryResult[a.OK]).Inc()
		}
	}
}

// deliveryResult is the result label of agentenv_watchdog_alerts_total.
var deliveryResult = map[bool]string{true: "ok", false: "failed"}
