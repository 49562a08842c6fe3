package metrics

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/push"
	dto "github.com/prometheus/client_model/go"

	"github.com/agentenv/watchdog/pkg/httpbound"
)

// PushConfig says where a one-shot run pushes its metrics.
type PushConfig struct {
	URL string
	// Job and Grouping form the group's key: each run replaces the previous run's
	// metrics in it, and Prometheus (scraping the Pushgateway with honor_labels)
	// sees them under these labels.
	Job      string
	Grouping map[string]string
	Timeout  time.Duration
}

// maxPushAnswer bounds what is read of the Pushgateway's answer (its error
// message ends up in the run's error).
const maxPushAnswer = 4 << 10

// Push sends the metrics of a finished run to a Pushgateway with client_golang's
// pusher. Its counters hold this run's counts, not totals over runs: queries count
// them per run by the pushed last-pass timestamp (docs/monitoring.md). It POSTs (push.Add): the families sent replace theirs in the group and the
// others stay, so a failed run, which sends no last-successful-pass time, leaves
// the one of the last run that succeeded. The leader gauge is not sent: a one-shot
// run elects nobody.
func (m *Metrics) Push(ctx context.Context, c PushConfig) error {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	// The Pushgateway answers nothing but a status and a short error: its answer
	// is read up to maxPushAnswer bytes, and a redirect is refused.
	client := httpbound.Client(nil, maxPushAnswer)
	client.Timeout = c.Timeout
	p := push.New(c.URL, c.Job).
		Gatherer(prometheus.GathererFunc(m.pushed)).
		Client(client)
	for k, v := range c.Grouping {
		p = p.Grouping(k, v)
	}
	if err := p.AddContext(ctx); err != nil {
		return fmt.Errorf("push metrics to the Pushgateway: %w", err)
	}
	return nil
}

// pushed gathers what Push sends.
func (m *Metrics) pushed() ([]*dto.MetricFamily, error) {
	all, err := m.Registry.Gather()
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, f := range all {
		switch f.GetName() {
		case "agentenv_watchdog_leader":
			continue
		case "agentenv_watchdog_last_successful_pass_timestamp_seconds":
			if len(f.GetMetric()) == 1 && f.GetMetric()[0].GetGauge().GetValue() == 0 {
				continue // no pass of this run succeeded
			}
		}
		out = append(out, f)
	}
	return out, nil
}
