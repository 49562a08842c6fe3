package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/push"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/utils/ptr"

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
	// metrics.json); a lost race is an error.
	Totals func(ctx context.Context, f func(old string) (string, error)) error
}

// maxPushAnswer bounds what is read of the Pushgateway's answer (a status, a short error).
const maxPushAnswer = 4 << 10

// Push sends a finished run's metrics to a Pushgateway, counters (and histogram) carrying the running totals
// of every run, saved first: a pushed total never runs ahead of the saved one, and unsaved counts are lost,
// never counted twice (docs/monitoring.md, "Counters in each mode"). push.Add replaces only the families
// sent, so a failed run leaves the last success's time. No leader gauge (nobody elected). The error joins
// every problem; the push may have happened despite it.
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

// Totals are the running totals of a CronJob run's pushed counters by series (a
// histogram's count, sum and buckets each one), so a pushed `_total` is a counter.
type Totals map[string]float64

// totalsDoc is Totals as stored.
type totalsDoc struct {
	Version int                `json:"version"`
	Series  map[string]float64 `json:"series"`
}

const totalsVersion = 1

// DecodeTotals reads stored totals; "" is none yet.
func DecodeTotals(raw string) (Totals, error) {
	if raw == "" {
		return Totals{}, nil
	}
	var d totalsDoc
	if err := json.Unmarshal([]byte(raw), &d); err != nil {
		return nil, fmt.Errorf("running totals: %w", err)
	}
	if d.Version != totalsVersion {
		return nil, fmt.Errorf("running totals: version %d, this watchdog reads %d", d.Version, totalsVersion)
	}
	t := Totals{}
	for k, v := range d.Series {
		if v < 0 || v != v { // a counter never is; NaN is not equal to itself
			return nil, fmt.Errorf("running totals: %s = %v", k, v)
		}
		t[k] = v
	}
	return t, nil
}

// Encode is t as stored.
func (t Totals) Encode() (string, error) {
	b, err := json.Marshal(totalsDoc{Version: totalsVersion, Series: t})
	return string(b), err
}

// eachCounter calls f with the key and value of each counter and histogram count, sum and bucket.
func eachCounter(fams []*dto.MetricFamily, f func(key string, v *float64)) {
	for _, fam := range fams {
		for _, m := range fam.GetMetric() {
			key := fam.GetName() + labelKey(m.GetLabel())
			switch fam.GetType() {
			case dto.MetricType_COUNTER:
				if c := m.GetCounter(); c != nil && c.Value != nil {
					f(key, c.Value)
				}
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				if h == nil {
					continue
				}
				count := float64(h.GetSampleCount())
				f(key+"_count", &count)
				h.SampleCount = ptr.To(uint64(count))
				f(key+"_sum", h.SampleSum) // always set by client_golang
				for _, b := range h.GetBucket() {
					n := float64(b.GetCumulativeCount())
					f(key+"_bucket{le="+strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)+"}", &n)
					b.CumulativeCount = ptr.To(uint64(n))
				}
			}
		}
	}
}

// labelKey is a series' labels in a stable order, as {a="x",b="y"}.
func labelKey(labels []*dto.LabelPair) string {
	if len(labels) == 0 {
		return ""
	}
	parts := make([]string, 0, len(labels))
	for _, l := range labels {
		parts = append(parts, l.GetName()+"="+strconv.Quote(l.GetValue()))
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, ",") + "}"
}
