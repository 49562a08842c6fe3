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
	"github.com/agentenv/watchdog/pkg/state"
)

// Queries is the PromQL the backtest reads (docs/backtest.md): series selectors,
// read raw so that a gap stays a gap, and Expected, an expression of one series.
type Queries struct {
	Ready, Rejected, Accepted, StartTime string
	Expected                             string
	// ExpectedSeries is scraped with the serving count: its spacing is the count's resolution.
	ExpectedSeries string
	// PodReady, read when set, is the pods' readiness: an HA scheduler's leader is the ready pod.
	// A caller clears DefaultQueries' PodReady unless it replays --leader-lease.
	PodReady string
	// PodLabel holds the pod's name on the scheduler's series, KSMPodLabel on kube-state-metrics'.
	PodLabel, KSMPodLabel string
}

// DefaultQueries are the selectors for the chart's defaults; the serving count is
// kube-state-metrics' EndpointSlice series, counted as discovery counts.
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
		PodLabel:       "pod", KSMPodLabel: "pod",
	}
}

// History is what Prometheus recorded between From and To, read by Queries.
type History struct {
	From, To                                       time.Time
	Queries                                        Queries
	Ready, Rejected, Accepted, StartTime, PodReady []*model.SampleStream
	// Expected is the serving count at each Step; a lookback of two ExpectedIntervals keeps a gap a gap.
	Expected []model.SamplePair
	Step     time.Duration
	// ExpectedInterval is the median spacing of ExpectedSeries, else of the ready samples.
	ExpectedInterval time.Duration
	Warnings         []string
}

const (
	rawWindow = 6 * time.Hour // one raw read, far below Prometheus' default sample limit
	maxSteps  = 10000         // a range query under Prometheus' 11,000 points per series
)

// Fetch reads [from, to] (to after from) through api, each query within timeout; step is Expected's, 0 its own.
func Fetch(ctx context.Context, api promv1.API, q Queries, from, to time.Time, step, timeout time.Duration) (*History, error) {
	h := &History{From: from, To: to, Queries: q}
	// From a little before the start, so that the first run has the latest sample.
	f := fetcher{api: api, timeout: timeout, h: h, from: from.Add(-10 * time.Minute)}
	var err error
	var cadence []*model.SampleStream // --expected-series
	for _, r := range []struct {
		flag, selector string
		into           *[]*model.SampleStream
	}{{"--ready-series", q.Ready, &h.Ready}, {"--rejected-series", q.Rejected, &h.Rejected}, {"--start-time-series", q.StartTime, &h.StartTime},
		// Unset selectors (a caller's own Queries) read as absent.
		{"the accepted-heartbeat series", q.Accepted, &h.Accepted}, {"--pod-ready-series", q.PodReady, &h.PodReady},
		{"--expected-series", q.ExpectedSeries, &cadence}} {
		if r.selector != "" {
			if *r.into, err = f.raw(ctx, r.flag, r.selector); err != nil {
				return nil, err
			}
		}
	}
	if len(h.Ready) == 0 {
		return nil, fmt.Errorf("--ready-series %s: no samples between %s and %s", q.Ready, from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	// The count at its own resolution: kube-state-metrics, often scraped less often, would show gaps at the scheduler's.
	h.ExpectedInterval = cmp.Or(medianSpacing(valuesOf(h.Ready)...), 15*time.Second)
	if d := medianSpacing(valuesOf(cadence)...); d > 0 {
		h.ExpectedInterval = d
	} else if q.ExpectedSeries != "" {
		h.Warnings = append(h.Warnings, fmt.Sprintf("--expected-series %s: no samples, so how often the serving count was recorded is unknown: "+
			"it is read at the scheduler's scrape interval (%s), and if it was recorded less often some readings are gaps that are not in the data; %s",
			q.ExpectedSeries, decide.ShortDuration(h.ExpectedInterval), ksmEndpointSlices))
	}
	h.Step = cmp.Or(max(step, 0), h.ExpectedInterval)
	// Whole seconds: Prometheus 2.43 and later refuse a fractional lookback.
	lookback := max((2 * h.ExpectedInterval).Round(time.Second), time.Second)
	if h.Expected, err = f.ranged(ctx, "--expected-query", q.Expected, h.Step, lookback); err != nil {
		return nil, err
	}
	if err := f.honoursLookback(ctx, mergeSamples(nil, slices.Concat(valuesOf(cadence)...)), lookback); err != nil {
		return nil, err
	}
	if len(h.Expected) == 0 {
		// Not an error: the replay shows what a blind watchdog does.
		h.Warnings = append(h.Warnings, fmt.Sprintf("--expected-query %s: no samples between %s and %s, so every run is unknown (blind) and nothing is restarted: "+
			"%s; or the query does not match kube-state-metrics' labels: %s",
			q.Expected, from.Format(time.RFC3339), to.Format(time.RFC3339), ksmEndpointSlices, ksmVariants))
	}
	return h, nil
}

// honoursLookback asks whether the server applies lookback_delta (2.43+): a ready
// series read 1.5 s after a sample, its next 3 s or more later, answers only with
// a lookback over 1 s. Else (2.42) the count was read with the server's own (5m),
// which bridges gaps: steps without a cadence sample within lookback are dropped.
func (f fetcher) honoursLookback(ctx context.Context, cadence []model.SamplePair, lookback time.Duration) error {
	s, i := f.h.Ready[0], 1
	for i < len(s.Values) && s.Values[i].Timestamp.Sub(s.Values[i-1].Timestamp) < 3*time.Second {
		i++
	}
	if i == len(s.Values) {
		return nil
	}
	qctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	v, _, _, err := f.api.Query(qctx, s.Metric.String(), s.Values[i-1].Timestamp.Time().Add(1500*time.Millisecond), promv1.WithTimeout(f.timeout), promv1.WithLookbackDelta(time.Second))
	if err != nil {
		return fmt.Errorf("--ready-series %s (does the server apply lookback_delta?): %w%s", s.Metric, err, answered(err))
	}
	if vec, ok := v.(model.Vector); !ok || len(vec) == 0 {
		return nil
	}
	what := "cannot tell a gap of the count shorter than that (no --expected-series samples)"
	if len(cadence) > 0 {
		what = fmt.Sprintf("drops the count's steps with no --expected-series sample within %s instead", decide.ShortDuration(lookback))
		f.h.Expected = slices.DeleteFunc(f.h.Expected, func(s model.SamplePair) bool {
			_, _, ok := at(cadence, s.Timestamp.Time(), lookback)
			return !ok
		})
	}
	f.h.Warnings = append(f.h.Warnings, "this Prometheus ignores the query parameter lookback_delta (Prometheus before 2.43, or a compatible API without it): "+
		"it read the serving count with its own lookback (5m by default), which bridges a gap; the backtest "+what)
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
func (f fetcher) raw(ctx context.Context, flag, selector string) ([]*model.SampleStream, error) {
	out := map[model.Fingerprint]*model.SampleStream{}
	for end := f.h.To; end.After(f.from); end = end.Add(-rawWindow) {
		// Whole seconds, rounded up: the duplicates of overlapping windows are merged away.
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
	// In the order of their labels: the replay does not depend on the answer's order.
	return slices.SortedFunc(maps.Values(out), func(a, b *model.SampleStream) int { return strings.Compare(a.Metric.String(), b.Metric.String()) }), nil
}

// ranged evaluates expr at every step from a multiple of step (the steps do not
// depend on the start), in ranges of at most maxSteps, with the lookback given.
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

// ksmEndpointSlices says how to make kube-state-metrics export EndpointSlice series.
const ksmEndpointSlices = "kube-state-metrics exports EndpointSlice series only while it watches endpointslices: " +
	"if it runs with --resources (its Helm chart: collectors), add endpointslices to the list " +
	"(kube-state-metrics --resources=<the list it has>,endpointslices), and let its ServiceAccount list and watch endpointslices.discovery.k8s.io"

// ksmVariants names how kube-state-metrics' labels may differ from the default count's.
const ksmVariants = "try the --expected-query variants of docs/backtest.md (\"What your Prometheus must have\"): exported_namespace instead of namespace " +
	"(kube-state-metrics scraped without honorLabels), ready=\"true\" instead of serving=\"true\",terminating=\"false\" " +
	"(releases that wrote terminating into serving), and check kube_endpointslice_endpoints' endpointslice names (--nodes-service) and port (--nodes-port)"

// answered is what an API that refused a query said when not Prometheus' JSON (a
// gateway's "authentication failed"): the client's error says only the code.
func answered(err error) string {
	var pe *promv1.Error
	if !errors.As(err, &pe) || pe.Detail == "" {
		return ""
	}
	return fmt.Sprintf(" (the API answered: %q)", state.Truncate(strings.Join(strings.Fields(pe.Detail), " "), 203))
}

func appendOnce(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// mergeSamples is a and b in time order, one sample per timestamp.
func mergeSamples(a, b []model.SamplePair) []model.SamplePair {
	out := append(slices.Clone(a), b...)
	slices.SortStableFunc(out, func(x, y model.SamplePair) int { return cmp.Compare(x.Timestamp, y.Timestamp) })
	return slices.CompactFunc(out, func(x, y model.SamplePair) bool { return x.Timestamp == y.Timestamp })
}

func valuesOf(series []*model.SampleStream) [][]model.SamplePair {
	var out [][]model.SamplePair
	for _, s := range series {
		out = append(out, s.Values)
	}
	return out
}

// medianSpacing is the median time between consecutive samples (the scrape interval, robust to a gap); 0 without two.
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
