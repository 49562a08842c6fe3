// Package backtest replays recorded Prometheus history through the watchdog's own
// pass (pkg/check's Runner, with the decision core, confirmation sampling, gates,
// budget, back-off and alert planning exactly as `watchdog check` runs them) at
// simulated times, and beside it what the stop-gap script would have done.
package backtest

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// Queries is the PromQL the backtest reads. Ready, Rejected and StartTime are
// series selectors (their raw samples are read, so that a gap in the data stays a
// gap); Expected is an expression evaluated over the range, one series.
type Queries struct {
	Ready     string
	Rejected  string
	StartTime string
	Expected  string
	// PodLabel names the label holding the scheduler pod's name.
	PodLabel string
}

// DefaultQueries are the selectors for the chart's defaults: the scheduler in
// namespace, its pods named after deployment, and the serving node count from
// kube-state-metrics' EndpointSlice series (--resources=endpointslices), counted
// as discovery counts (docs/backtest.md).
func DefaultQueries(namespace, deployment, service string, port int) Queries {
	ns := strconv.Quote(namespace)
	slices := strconv.Quote(service + "-.+") // EndpointSlices are named <service>-<suffix>
	return Queries{
		Ready:     fmt.Sprintf(`agentenv_scheduler_observed_nodes{namespace=%s,status="ready"}`, ns),
		Rejected:  fmt.Sprintf(`agentenv_scheduler_rpc_duration_seconds_count{namespace=%s,rpc="Heartbeat",status="invalid_argument"}`, ns),
		StartTime: fmt.Sprintf(`process_start_time_seconds{namespace=%s,pod=~%s}`, ns, strconv.Quote(deployment+"-.+")),
		Expected: fmt.Sprintf(`count(count by (targetref_name) (`+
			`kube_endpointslice_endpoints{namespace=%[1]s,endpointslice=~%[2]s,serving="true",terminating="false",targetref_name!=""}`+
			` and on (namespace, endpointslice) kube_endpointslice_ports{namespace=%[1]s,endpointslice=~%[2]s,port_number="%[3]d"}))`+
			` or on () (0 * count(kube_endpointslice_info{namespace=%[1]s,endpointslice=~%[2]s}))`, ns, slices, port),
		PodLabel: "pod",
	}
}

// History is what Prometheus recorded between From and To.
type History struct {
	From, To time.Time
	// Targets are the scheduler's scrape targets (one per pod), by first sample.
	Targets []*Target
	// Expected is the serving node count at each Step of the range.
	Expected []model.SamplePair
	Step     time.Duration
	// ScrapeInterval is the median spacing of the ready samples; a sample older
	// than MaxAge at a given time is a gap (unknown), never a reading.
	ScrapeInterval time.Duration
	MaxAge         time.Duration
	Warnings       []string
}

// Target is one scheduler scrape target: its pod and three of its series.
type Target struct {
	Pod string
	// Key is the target's label set (without the metric's own labels): the three
	// series of one target are joined on it.
	Key       string
	Namespace string
	Ready     []model.SamplePair
	Rejected  []model.SamplePair
	StartTime []model.SamplePair
}

// First and Last are the target's first and last ready samples.
func (t *Target) First() time.Time { return t.Ready[0].Timestamp.Time() }
func (t *Target) Last() time.Time  { return t.Ready[len(t.Ready)-1].Timestamp.Time() }

// rawWindow is the span of one raw-sample query: a day of 15 s samples is
// 5,760 points per series, far below Prometheus' default sample limit.
const rawWindow = 6 * time.Hour

// maxSteps keeps a range query under Prometheus' 11,000 points per series.
const maxSteps = 10000

// Fetch reads the history of [from, to] through api. Each query is bounded by
// timeout. step is the resolution of the Expected query; zero uses the ready
// series' scrape interval.
func Fetch(ctx context.Context, api promv1.API, q Queries, from, to time.Time, step, timeout time.Duration) (*History, error) {
	if !to.After(from) {
		return nil, fmt.Errorf("the range is empty: --end %s is not after --start %s", to.Format(time.RFC3339), from.Format(time.RFC3339))
	}
	h := &History{From: from, To: to}
	f := fetcher{api: api, timeout: timeout, h: h}
	// Read a little before the start, so that the first run has the latest sample.
	lead := 10 * time.Minute
	ready, err := f.raw(ctx, "--ready-series", q.Ready, from.Add(-lead), to)
	if err != nil {
		return nil, err
	}
	if len(ready) == 0 {
		return nil, fmt.Errorf("--ready-series %s: no samples between %s and %s", q.Ready, from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	rejected, err := f.raw(ctx, "--rejected-series", q.Rejected, from.Add(-lead), to)
	if err != nil {
		return nil, err
	}
	started, err := f.raw(ctx, "--start-time-series", q.StartTime, from.Add(-lead), to)
	if err != nil {
		return nil, err
	}
	h.Targets = join(q.PodLabel, ready, rejected, started)
	h.ScrapeInterval = medianSpacing(h.Targets)
	h.MaxAge = 2 * h.ScrapeInterval
	if step <= 0 {
		step = h.ScrapeInterval
	}
	h.Step = step
	if h.Expected, err = f.ranged(ctx, "--expected-query", q.Expected, from.Add(-lead), to, step); err != nil {
		return nil, err
	}
	if len(h.Expected) == 0 {
		// Not an error: the replay still shows what a watchdog that cannot count
		// the nodes does (it is blind). But the cause is the data, and says so.
		h.Warnings = append(h.Warnings, fmt.Sprintf("--expected-query %s: no samples between %s and %s, so every run is unknown (blind) and nothing is restarted: "+
			"kube-state-metrics exports EndpointSlices only with --resources including endpointslices; or pass a query that counts the serving nodes (docs/backtest.md)",
			q.Expected, from.Format(time.RFC3339), to.Format(time.RFC3339)))
	}
	for _, t := range h.Targets {
		if len(t.StartTime) == 0 {
			h.Warnings = append(h.Warnings, fmt.Sprintf("pod %s: no process_start_time_seconds (--start-time-series): its age is taken from its first sample, so a container restart is not seen as one", t.Pod))
		}
	}
	return h, nil
}

type fetcher struct {
	api     promv1.API
	timeout time.Duration
	h       *History
}

// raw reads every sample of the series selector between from and to, in windows.
func (f fetcher) raw(ctx context.Context, flag, selector string, from, to time.Time) (map[model.Fingerprint]*model.SampleStream, error) {
	out := map[model.Fingerprint]*model.SampleStream{}
	for end := to; end.After(from); end = end.Add(-rawWindow) {
		// Whole seconds, rounded up: the windows may overlap by a fraction of a
		// second, and duplicates are dropped below.
		window := min(rawWindow, end.Sub(from))
		query := fmt.Sprintf("%s[%ds]", selector, int64((window+time.Second-1)/time.Second))
		v, err := f.query(ctx, flag, selector, func(qctx context.Context) (model.Value, promv1.Warnings, error) {
			v, w, _, err := f.api.Query(qctx, query, end, promv1.WithTimeout(f.timeout))
			return v, w, err
		})
		if err != nil {
			return nil, err
		}
		m, ok := v.(model.Matrix)
		if !ok {
			return nil, fmt.Errorf("%s %s: want a series selector, got a %s result", flag, selector, v.Type())
		}
		for _, s := range m {
			fp := s.Metric.Fingerprint()
			if cur, ok := out[fp]; ok {
				cur.Values = append(cur.Values, s.Values...)
			} else {
				out[fp] = s
			}
		}
	}
	for _, s := range out {
		sort.Slice(s.Values, func(i, j int) bool { return s.Values[i].Timestamp < s.Values[j].Timestamp })
		s.Values = slices.CompactFunc(s.Values, func(a, b model.SamplePair) bool { return a.Timestamp == b.Timestamp })
	}
	return out, nil
}

// ranged evaluates expr at every step of [from, to], in ranges of at most
// maxSteps. The lookback is two steps, so that a gap in the data stays a gap
// rather than the last value carried over five minutes.
func (f fetcher) ranged(ctx context.Context, flag, expr string, from, to time.Time, step time.Duration) ([]model.SamplePair, error) {
	var out []model.SamplePair
	span := time.Duration(maxSteps) * step
	for start := from; !start.After(to); start = start.Add(span + step) {
		end := start.Add(span)
		if end.After(to) {
			end = to
		}
		r := promv1.Range{Start: start, End: end, Step: step}
		v, err := f.query(ctx, flag, expr, func(qctx context.Context) (model.Value, promv1.Warnings, error) {
			v, w, _, err := f.api.QueryRange(qctx, expr, r, promv1.WithTimeout(f.timeout), promv1.WithLookbackDelta(2*step))
			return v, w, err
		})
		if err != nil {
			return nil, err
		}
		m, ok := v.(model.Matrix)
		if !ok {
			return nil, fmt.Errorf("%s: unexpected %s result", flag, v.Type())
		}
		if len(m) > 1 {
			return nil, fmt.Errorf("%s %s: returns %d series (%s, ...), want one number: aggregate it (count, sum)", flag, expr, len(m), m[0].Metric)
		}
		if len(m) == 1 {
			out = append(out, m[0].Values...)
		}
	}
	return out, nil
}

func (f fetcher) query(ctx context.Context, flag, q string, do func(context.Context) (model.Value, promv1.Warnings, error)) (model.Value, error) {
	qctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	v, warnings, err := do(qctx)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flag, q, err)
	}
	for _, w := range warnings {
		f.h.Warnings = appendOnce(f.h.Warnings, fmt.Sprintf("Prometheus on %s: %s", flag, w))
	}
	return v, nil
}

func appendOnce(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// ownLabels are labels of a metric rather than of its scrape target.
var ownLabels = []model.LabelName{model.MetricNameLabel, "status", "rpc"}

// targetKey is a series' target: its labels less the metric's own.
func targetKey(m model.Metric) string {
	c := m.Clone()
	for _, l := range ownLabels {
		delete(c, l)
	}
	return c.String()
}

// join groups the three selectors' series by target. A target without a ready
// series is not a scheduler pod the backtest can judge.
func join(podLabel string, ready, rejected, started map[model.Fingerprint]*model.SampleStream) []*Target {
	byKey := map[string]*Target{}
	for _, s := range ready {
		if len(s.Values) == 0 {
			continue
		}
		key := targetKey(s.Metric)
		pod := string(s.Metric[model.LabelName(podLabel)])
		if pod == "" {
			pod = string(s.Metric[model.InstanceLabel])
		}
		t := &Target{Pod: pod, Key: key, Namespace: string(s.Metric["namespace"]), Ready: s.Values}
		if cur, ok := byKey[key]; ok {
			cur.Ready = mergeSamples(cur.Ready, s.Values)
			continue
		}
		byKey[key] = t
	}
	attach := func(series map[model.Fingerprint]*model.SampleStream, set func(*Target, []model.SamplePair)) {
		for _, s := range series {
			if t, ok := byKey[targetKey(s.Metric)]; ok {
				set(t, s.Values)
			}
		}
	}
	attach(rejected, func(t *Target, v []model.SamplePair) { t.Rejected = mergeSamples(t.Rejected, v) })
	attach(started, func(t *Target, v []model.SamplePair) { t.StartTime = mergeSamples(t.StartTime, v) })
	out := make([]*Target, 0, len(byKey))
	for _, t := range byKey {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].First().Equal(out[j].First()) {
			return out[i].First().Before(out[j].First())
		}
		return out[i].Key < out[j].Key
	})
	return out
}

func mergeSamples(a, b []model.SamplePair) []model.SamplePair {
	out := append(slices.Clone(a), b...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Timestamp < out[j].Timestamp })
	return slices.CompactFunc(out, func(x, y model.SamplePair) bool { return x.Timestamp == y.Timestamp })
}

// medianSpacing is the median time between consecutive ready samples: the scrape
// interval, robust to the odd gap.
func medianSpacing(targets []*Target) time.Duration {
	var d []time.Duration
	for _, t := range targets {
		for i := 1; i < len(t.Ready); i++ {
			d = append(d, t.Ready[i].Timestamp.Time().Sub(t.Ready[i-1].Timestamp.Time()))
		}
	}
	if len(d) == 0 {
		return 15 * time.Second
	}
	slices.Sort(d)
	return d[len(d)/2]
}

// at is the latest sample at or before t, if it is at most maxAge old.
func at(samples []model.SamplePair, t time.Time, maxAge time.Duration) (float64, time.Time, bool) {
	ts := model.TimeFromUnixNano(t.UnixNano())
	i := sort.Search(len(samples), func(i int) bool { return samples[i].Timestamp > ts })
	if i == 0 {
		return 0, time.Time{}, false
	}
	s := samples[i-1]
	when := s.Timestamp.Time()
	if t.Sub(when) > maxAge || math.IsNaN(float64(s.Value)) {
		return 0, when, false
	}
	return float64(s.Value), when, true
}
