// Package backtest replays recorded Prometheus history through the watchdog's own
// pass (pkg/check's Runner, with the decision core, confirmation sampling, gates,
// budget, back-off and alert planning exactly as `watchdog check` runs them) at
// simulated times, and beside it what the stop-gap script would have done.
package backtest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/agentenv/watchdog/pkg/decide"
)

// Queries is the PromQL the backtest reads (docs/backtest.md, "What it reads").
// Ready, Rejected, Accepted and StartTime are series selectors, read as raw
// samples so that a gap stays a gap; Expected is an expression, one series.
type Queries struct {
	Ready, Rejected, Accepted, StartTime string
	Expected                             string
	// ExpectedSeries is recorded by the scrape that records the serving count:
	// its spacing is the count's resolution.
	ExpectedSeries string
	// PodReady is the scheduler pods' readiness, joined to the targets by
	// PodLabel: an HA scheduler's leader is the ready pod. Read when set, so a
	// caller clears DefaultQueries' unless it replays --leader-lease.
	PodReady string
	// PodLabel names the label holding the scheduler pod's name.
	PodLabel string
}

// DefaultQueries are the selectors for the chart's defaults: the scheduler in
// namespace, its pods named after deployment and their readiness, and the serving
// node count from kube-state-metrics' EndpointSlice series, counted as discovery counts.
func DefaultQueries(namespace, deployment, service string, port int) Queries {
	ns := strconv.Quote(namespace)
	// Names inside =~ are matched as themselves (a Deployment's name may hold dots).
	pods := strconv.Quote(regexp.QuoteMeta(deployment) + "-.+")
	slices := strconv.Quote(regexp.QuoteMeta(service) + "-.+") // EndpointSlices are named <service>-<suffix>
	return Queries{
		Ready:     fmt.Sprintf(`agentenv_scheduler_observed_nodes{namespace=%s,status="ready"}`, ns),
		Rejected:  fmt.Sprintf(`agentenv_scheduler_rpc_duration_seconds_count{namespace=%s,rpc="Heartbeat",status="invalid_argument"}`, ns),
		Accepted:  fmt.Sprintf(`agentenv_scheduler_rpc_duration_seconds_count{namespace=%s,rpc="Heartbeat",status="ok"}`, ns),
		StartTime: fmt.Sprintf(`process_start_time_seconds{namespace=%s,pod=~%s}`, ns, pods),
		PodReady:  fmt.Sprintf(`kube_pod_status_ready{namespace=%s,pod=~%s,condition="true"}`, ns, pods),
		Expected: fmt.Sprintf(`count(count by (targetref_name) (`+
			`kube_endpointslice_endpoints{namespace=%[1]s,endpointslice=~%[2]s,serving="true",terminating="false",targetref_name!=""}`+
			` and on (namespace, endpointslice) kube_endpointslice_ports{namespace=%[1]s,endpointslice=~%[2]s,port_number="%[3]d"}))`+
			` or on () (0 * count(kube_endpointslice_info{namespace=%[1]s,endpointslice=~%[2]s}))`, ns, slices, port),
		ExpectedSeries: fmt.Sprintf(`kube_endpointslice_info{namespace=%s,endpointslice=~%s}`, ns, slices),
		PodLabel:       "pod",
	}
}

// History is what Prometheus recorded between From and To.
type History struct {
	From, To time.Time
	// Targets are the scheduler's scrape targets (one per pod), by first sample.
	Targets []*Target
	// Expected is the serving node count at each Step, from samples at most two
	// ExpectedIntervals old: a step without one is a gap.
	Expected []model.SamplePair
	Step     time.Duration
	// ExpectedInterval is the median spacing of ExpectedSeries, else ScrapeInterval.
	ExpectedInterval time.Duration
	// ScrapeInterval is the median spacing of the ready samples; a sample older
	// than two of them is a gap (unknown), never a reading (Target.MaxAge overrides).
	ScrapeInterval   time.Duration
	RejectedInterval time.Duration
	// LeaderFromReadiness: the scheduler runs HA (--leader-lease) and its leader
	// is the one pod whose readiness (Target.PodReady) is 1.
	LeaderFromReadiness bool
	PodReadyInterval    time.Duration
	Warnings            []string
}

// Target is one scheduler scrape target: its pod and its series.
type Target struct {
	Pod string
	// Key is the target's labels less the metric's own: its series join on it.
	Key                                  string
	Namespace                            string
	Ready, Rejected, Accepted, StartTime []model.SamplePair
	// MaxAge is twice this target's own scrape interval: an older ready sample
	// is a gap.
	MaxAge time.Duration
	// PodReady is the pod's readiness (1 or 0), read to tell an HA leader.
	PodReady []model.SamplePair
}

// First and Last are the target's first and last ready samples.
func (t *Target) First() time.Time { return t.Ready[0].Timestamp.Time() }
func (t *Target) Last() time.Time  { return t.Ready[len(t.Ready)-1].Timestamp.Time() }

// rawWindow is the span of one raw-sample query, far below Prometheus' default
// sample limit per query.
const rawWindow = 6 * time.Hour

// maxSteps keeps a range query under Prometheus' 11,000 points per series.
const maxSteps = 10000

// Fetch reads the history of [from, to] through api, each query bounded by
// timeout. step is the resolution of the Expected query; zero: its own interval.
func Fetch(ctx context.Context, api promv1.API, q Queries, from, to time.Time, step, timeout time.Duration) (*History, error) {
	if !to.After(from) {
		return nil, fmt.Errorf("the range is empty: --end %s is not after --start %s", to.Format(time.RFC3339), from.Format(time.RFC3339))
	}
	h := &History{From: from, To: to}
	// Read a little before the start, so that the first run has the latest sample.
	f := fetcher{api: api, timeout: timeout, h: h, from: from.Add(-10 * time.Minute)}
	ready, err := f.raw(ctx, "--ready-series", q.Ready)
	if err != nil {
		return nil, err
	}
	if len(ready) == 0 {
		return nil, fmt.Errorf("--ready-series %s: no samples between %s and %s", q.Ready, from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	rejected, err := f.raw(ctx, "--rejected-series", q.Rejected)
	if err != nil {
		return nil, err
	}
	started, err := f.raw(ctx, "--start-time-series", q.StartTime)
	if err != nil {
		return nil, err
	}
	// Unset accepted heartbeats (a caller's own Queries) read as absent.
	var accepted map[model.Fingerprint]*model.SampleStream
	if q.Accepted != "" {
		if accepted, err = f.raw(ctx, "the accepted-heartbeat series", q.Accepted); err != nil {
			return nil, err
		}
	}
	h.Targets = join(q.PodLabel, ready, rejected, accepted, started)
	var readies [][]model.SamplePair
	for _, t := range h.Targets {
		t.MaxAge = 2 * medianSpacing(t.Ready)
		readies = append(readies, t.Ready)
	}
	h.ScrapeInterval = cmp.Or(medianSpacing(readies...), 15*time.Second) // one sample: Prometheus' usual
	h.RejectedInterval = medianSpacing(valuesOf(rejected)...)
	// The serving count is read at its own resolution: kube-state-metrics is often
	// scraped less often than the scheduler, and read at the scheduler's some
	// steps would find no sample: a gap that is not in the data.
	h.ExpectedInterval = h.ScrapeInterval
	if q.ExpectedSeries != "" {
		cadence, err := f.raw(ctx, "--expected-series", q.ExpectedSeries)
		if err != nil {
			return nil, err
		}
		if d := medianSpacing(valuesOf(cadence)...); d > 0 {
			h.ExpectedInterval = d
		} else {
			h.Warnings = append(h.Warnings, fmt.Sprintf("--expected-series %s: no samples, so how often the serving count was recorded is unknown: "+
				"it is read at the scheduler's scrape interval (%s), and if it was recorded less often some readings are gaps that are not in the data; %s",
				q.ExpectedSeries, decide.ShortDuration(h.ScrapeInterval), ksmEndpointSlices))
		}
	}
	h.Step = cmp.Or(max(step, 0), h.ExpectedInterval)
	if h.Expected, err = f.ranged(ctx, "--expected-query", q.Expected, h.Step, 2*h.ExpectedInterval); err != nil {
		return nil, err
	}
	if len(h.Expected) == 0 {
		// Not an error: the replay shows what a blind watchdog does; the cause is
		// the data, and the warning says so.
		h.Warnings = append(h.Warnings, fmt.Sprintf("--expected-query %s: no samples between %s and %s, so every run is unknown (blind) and nothing is restarted: "+
			"%s; or pass a query that counts the serving nodes (docs/backtest.md)",
			q.Expected, from.Format(time.RFC3339), to.Format(time.RFC3339), ksmEndpointSlices))
	}
	if q.PodReady != "" {
		if err := f.podReady(ctx, q); err != nil {
			return nil, err
		}
	}
	for _, t := range h.Targets {
		if len(t.StartTime) == 0 {
			h.Warnings = append(h.Warnings, fmt.Sprintf("pod %s: no process_start_time_seconds (--start-time-series): its age is taken from its first sample, so a container restart is not seen as one", t.Pod))
		}
	}
	return h, nil
}

// podReady reads the pods' readiness and attaches it to the targets by pod
// name. With none for any target the leader can never be told: an error, not a
// replay that judges nobody.
func (f fetcher) podReady(ctx context.Context, q Queries) error {
	series, err := f.raw(ctx, "--pod-ready-series", q.PodReady)
	if err != nil {
		return err
	}
	byPod := map[string][]model.SamplePair{}
	for _, s := range series {
		pod := string(s.Metric[model.LabelName(q.PodLabel)])
		byPod[pod] = mergeSamples(byPod[pod], s.Values)
	}
	for _, t := range f.h.Targets {
		t.PodReady = byPod[t.Pod]
	}
	if !slices.ContainsFunc(f.h.Targets, func(t *Target) bool { return len(t.PodReady) > 0 }) {
		return fmt.Errorf("--leader-lease: the history has no readiness of the scheduler pods (--pod-ready-series %s, label %s) between %s and %s, "+
			"so the leader of an HA scheduler cannot be told and its standbys (ready 0 by design) would be judged wedged: "+
			"kube-state-metrics exports kube_pod_status_ready by default; or drop --leader-lease for a scheduler with one replica",
			q.PodReady, q.PodLabel, f.from.Format(time.RFC3339), f.h.To.Format(time.RFC3339))
	}
	f.h.LeaderFromReadiness = true
	f.h.PodReadyInterval = cmp.Or(medianSpacing(valuesOf(series)...), f.h.ScrapeInterval)
	return nil
}

// fetcher reads [from, h.To] into h, each query bounded by timeout.
type fetcher struct {
	api     promv1.API
	timeout time.Duration
	h       *History
	from    time.Time
}

// raw reads every sample of the series selector, in windows.
func (f fetcher) raw(ctx context.Context, flag, selector string) (map[model.Fingerprint]*model.SampleStream, error) {
	out := map[model.Fingerprint]*model.SampleStream{}
	for end := f.h.To; end.After(f.from); end = end.Add(-rawWindow) {
		// Whole seconds, rounded up: windows overlapping by a fraction of a second
		// give duplicates, which mergeSamples drops.
		window := min(rawWindow, end.Sub(f.from))
		query := fmt.Sprintf("%s[%ds]", selector, int64((window+time.Second-1)/time.Second))
		m, err := f.query(ctx, flag, selector, func(qctx context.Context) (model.Value, promv1.Warnings, error) {
			v, w, _, err := f.api.Query(qctx, query, end, promv1.WithTimeout(f.timeout))
			return v, w, err
		})
		if err != nil {
			return nil, err
		}
		for _, s := range m {
			if cur, ok := out[s.Metric.Fingerprint()]; ok {
				cur.Values = append(cur.Values, s.Values...)
			} else {
				out[s.Metric.Fingerprint()] = s
			}
		}
	}
	for _, s := range out {
		s.Values = mergeSamples(nil, s.Values) // sorted once, not again for every window
	}
	return out, nil
}

// ranged evaluates expr at every step, in ranges of at most maxSteps, from a
// multiple of step so that the steps do not depend on the start.
// The lookback (two of the series' intervals) keeps a gap a gap, not five minutes
// of the last value, and a sparse series no gap.
func (f fetcher) ranged(ctx context.Context, flag, expr string, step, lookback time.Duration) ([]model.SamplePair, error) {
	var out []model.SamplePair
	from := time.UnixMilli(f.from.UnixMilli() / step.Milliseconds() * step.Milliseconds()).UTC()
	span := time.Duration(maxSteps) * step
	for start := from; !start.After(f.h.To); start = start.Add(span + step) {
		end := slices.MinFunc([]time.Time{start.Add(span), f.h.To}, time.Time.Compare)
		r := promv1.Range{Start: start, End: end, Step: step}
		m, err := f.query(ctx, flag, expr, func(qctx context.Context) (model.Value, promv1.Warnings, error) {
			v, w, _, err := f.api.QueryRange(qctx, expr, r, promv1.WithTimeout(f.timeout), promv1.WithLookbackDelta(lookback))
			return v, w, err
		})
		if err != nil {
			return nil, err
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

// query runs do within the timeout; both raw and ranged reads answer a matrix.
func (f fetcher) query(ctx context.Context, flag, q string, do func(context.Context) (model.Value, promv1.Warnings, error)) (model.Matrix, error) {
	qctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	v, warnings, err := do(qctx)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w%s", flag, q, err, answered(err))
	}
	for _, w := range warnings {
		f.h.Warnings = appendOnce(f.h.Warnings, fmt.Sprintf("Prometheus on %s: %s", flag, w))
	}
	m, ok := v.(model.Matrix)
	if !ok {
		return nil, fmt.Errorf("%s %s: got a %s result, want samples (a series selector for a raw read)", flag, q, v.Type())
	}
	return m, nil
}

// ksmEndpointSlices says how to make kube-state-metrics export the EndpointSlice
// series the default queries read.
const ksmEndpointSlices = "kube-state-metrics exports EndpointSlice series only while it watches endpointslices: " +
	"if it runs with --resources (its Helm chart: collectors), add endpointslices to the list " +
	"(kube-state-metrics --resources=<the list it has>,endpointslices), and let its ServiceAccount list and watch endpointslices.discovery.k8s.io"

// answered is what an API that refused a query said when not Prometheus' own JSON:
// a gateway's "authentication failed" is the reason; the client's error says only the code.
func answered(err error) string {
	var pe *promv1.Error
	if !errors.As(err, &pe) || pe.Detail == "" {
		return ""
	}
	d := strings.Join(strings.Fields(pe.Detail), " ")
	if len(d) > 200 {
		d = d[:200] + "..."
	}
	return fmt.Sprintf(" (the API answered: %q)", d)
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

// join groups the selectors' series by target. A target without a ready series
// is not a scheduler pod the backtest can judge.
func join(podLabel string, ready, rejected, accepted, started map[model.Fingerprint]*model.SampleStream) []*Target {
	byKey := map[string]*Target{}
	for _, s := range ready {
		if key := targetKey(s.Metric); byKey[key] == nil && len(s.Values) > 0 {
			pod := cmp.Or(s.Metric[model.LabelName(podLabel)], s.Metric[model.InstanceLabel])
			byKey[key] = &Target{Pod: string(pod), Key: key, Namespace: string(s.Metric["namespace"])}
		}
	}
	attach := func(series map[model.Fingerprint]*model.SampleStream, set func(*Target, []model.SamplePair)) {
		for _, s := range series {
			if t, ok := byKey[targetKey(s.Metric)]; ok {
				set(t, s.Values)
			}
		}
	}
	attach(ready, func(t *Target, v []model.SamplePair) { t.Ready = mergeSamples(t.Ready, v) })
	attach(rejected, func(t *Target, v []model.SamplePair) { t.Rejected = mergeSamples(t.Rejected, v) })
	attach(accepted, func(t *Target, v []model.SamplePair) { t.Accepted = mergeSamples(t.Accepted, v) })
	attach(started, func(t *Target, v []model.SamplePair) { t.StartTime = mergeSamples(t.StartTime, v) })
	return slices.SortedFunc(maps.Values(byKey), func(a, b *Target) int {
		return cmp.Or(a.First().Compare(b.First()), strings.Compare(a.Key, b.Key))
	})
}

// mergeSamples is a and b in time order, one sample per timestamp.
func mergeSamples(a, b []model.SamplePair) []model.SamplePair {
	out := append(slices.Clone(a), b...)
	slices.SortStableFunc(out, func(x, y model.SamplePair) int { return cmp.Compare(x.Timestamp, y.Timestamp) })
	return slices.CompactFunc(out, func(x, y model.SamplePair) bool { return x.Timestamp == y.Timestamp })
}

func valuesOf(series map[model.Fingerprint]*model.SampleStream) [][]model.SamplePair {
	var out [][]model.SamplePair
	for _, s := range series {
		out = append(out, s.Values)
	}
	return out
}

// medianSpacing is the median time between consecutive samples of each series:
// the scrape interval, robust to the odd gap; 0 with fewer than two samples.
func medianSpacing(series ...[]model.SamplePair) time.Duration {
	var d []time.Duration
	for _, s := range series {
		for i := 1; i < len(s); i++ {
			d = append(d, s[i].Timestamp.Time().Sub(s[i-1].Timestamp.Time()))
		}
	}
	if len(d) == 0 {
		return 0
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
