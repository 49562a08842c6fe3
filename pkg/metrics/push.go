package metrics

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/push"
	dto "github.com/prometheus/client_model/go"

	"github.com/agentenv/watchdog/pkg/httpbound"
)

// PushConfig says where a one-shot run pushes its metrics.
type PushConfig struct {
	URL string
	// Job and Grouping key the group each run replaces (labels under honor_labels).
	Job      string
	Grouping map[string]string
	Timeout  time.Duration
	// Totals stores f of the stored running totals (the state ConfigMap's
	// metrics.json), calling f again after a lost race.
	Totals func(ctx context.Context, f func(old string) (string, error)) error
}

// maxPushAnswer bounds what is read of the Pushgateway's answer (a status, a short error).
const maxPushAnswer = 4 << 10

// Push sends a finished run's metrics to a Pushgateway, its counters (and histogram)
// carrying every run's running totals, saved first so a pushed total never runs
// ahead of the saved one: unsaved, this run's counts are lost, never counted twice
// (docs/monitoring.md, "Counters in each mode").
//
// It POSTs (push.Add): the families sent replace theirs and the others stay, so a
// failed run, sending no last-successful-pass time, leaves the last success's. No
// leader gauge (nobody elected). The error joins every problem; the push may have
// happened despite it.
func (m *Metrics) Push(ctx context.Context, c PushConfig) error {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	fams, err := m.Registry.Gather()
	if err != nil {
		return fmt.Errorf("metrics not pushed: gather: %w", err)
	}
	fams = slices.DeleteFunc(fams, func(f *dto.MetricFamily) bool {
		switch f.GetName() {
		case "agentenv_watchdog_leader":
			return true
		case "agentenv_watchdog_last_successful_pass_timestamp_seconds":
			return len(f.GetMetric()) == 1 && f.GetMetric()[0].GetGauge().GetValue() == 0 // no pass succeeded
		}
		return false
	})
	var problems []error
	if c.Totals != nil {
		run := Totals{}
		eachCounter(fams, func(key string, v *float64) { run[key] = *v })
		err := c.Totals(ctx, func(old string) (string, error) {
			totals, err := DecodeTotals(old)
			if err != nil {
				problems = append(problems, fmt.Errorf("%w: counted over from this run (a counter reset to Prometheus)", err))
				totals = Totals{}
			}
			for k, v := range run {
				totals[k] += v
			}
			// Carried now, pushed only once saved: a failed save drops them below.
			eachCounter(fams, func(key string, v *float64) { *v = totals[key] })
			return totals.Encode()
		})
		if err != nil {
			problems = append(problems, fmt.Errorf("counters not pushed (the Pushgateway keeps the last totals; this run's counts are lost): save their running totals: %w", err))
			fams = slices.DeleteFunc(fams, func(f *dto.MetricFamily) bool {
				return f.GetType() == dto.MetricType_COUNTER || f.GetType() == dto.MetricType_HISTOGRAM
			})
		}
	}
	client := httpbound.Client(nil, maxPushAnswer)
	client.Timeout = c.Timeout
	p := push.New(c.URL, c.Job).
		Gatherer(prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) { return fams, nil })).
		Client(client)
	for k, v := range c.Grouping {
		p = p.Grouping(k, v)
	}
	if err := p.AddContext(ctx); err != nil {
		problems = append(problems, fmt.Errorf("metrics not pushed: push to the Pushgateway: %w", err))
	}
	return errors.Join(problems...)
}
