package backtest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// fakeProm is a narrow stand-in for the Prometheus HTTP API (test/backtest runs
// the real server): each query names one recorded series. A raw query
// `<name>[Ns]` returns its samples in (time-N, time]; a range query evaluates
// the series at each step with Prometheus' lookback (the latest sample in
// (t-lookback, t], default 5m), as an instant vector selector does.
type fakeProm struct {
	series map[string]*model.SampleStream
	// ranges records each range query's start, step and lookback.
	ranges []fakeRange
	// ignoresLookback: as Prometheus 2.42, lookback_delta is not read.
	ignoresLookback bool
}

type fakeRange struct {
	start          time.Time
	step, lookback time.Duration
}

var rawQuery = regexp.MustCompile(`^(.*)\[(\d+)s\]$`)

func (f *fakeProm) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	seconds := func(name string) time.Time {
		v, _ := strconv.ParseFloat(r.FormValue(name), 64)
		return time.UnixMilli(int64(v * 1000)).UTC()
	}
	lookback := 5 * time.Minute
	if v := r.FormValue("lookback_delta"); v != "" && !f.ignoresLookback {
		lookback, _ = time.ParseDuration(v)
	}
	var out model.Matrix
	switch r.URL.Path {
	case "/api/v1/query":
		m := rawQuery.FindStringSubmatch(r.FormValue("query"))
		if m == nil { // an instant vector: each series' latest sample within the lookback
			vec := model.Vector{}
			if s, ok := f.series[r.FormValue("query")]; ok {
				if in := window(s.Values, seconds("time").Add(-lookback), seconds("time")); len(in) > 0 {
					vec = append(vec, &model.Sample{Metric: s.Metric, Value: in[len(in)-1].Value, Timestamp: model.TimeFromUnixNano(seconds("time").UnixNano())})
				}
			}
			body, _ := json.Marshal(map[string]any{"status": "success", "data": map[string]any{"resultType": "vector", "result": vec}})
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(body)
			return
		}
		n, _ := strconv.Atoi(m[2])
		end := seconds("time")
		if s, ok := f.series[m[1]]; ok {
			out = append(out, &model.SampleStream{Metric: s.Metric, Values: window(s.Values, end.Add(-time.Duration(n)*time.Second), end)})
		}
	case "/api/v1/query_range":
		start, end := seconds("start"), seconds("end")
		stepSec, _ := strconv.ParseFloat(r.FormValue("step"), 64)
		step := time.Duration(stepSec * float64(time.Second))
		f.ranges = append(f.ranges, fakeRange{start: start, step: step, lookback: lookback})
		if s, ok := f.series[r.FormValue("query")]; ok {
			res := &model.SampleStream{Metric: model.Metric{}}
			for t := start; !t.After(end); t = t.Add(step) {
				if in := window(s.Values, t.Add(-lookback), t); len(in) > 0 {
					res.Values = append(res.Values, model.SamplePair{Timestamp: model.TimeFromUnixNano(t.UnixNano()), Value: in[len(in)-1].Value})
				}
			}
			if len(res.Values) > 0 {
				out = append(out, res)
			}
		}
	default:
		http.NotFound(w, r)
		return
	}
	body, _ := json.Marshal(map[string]any{"status": "success", "data": map[string]any{"resultType": "matrix", "result": out}})
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// window is the samples in (from, to].
func window(s []model.SamplePair, from, to time.Time) []model.SamplePair {
	var out []model.SamplePair
	for _, p := range s {
		if at := p.Timestamp.Time(); at.After(from) && !at.After(to) {
			out = append(out, p)
		}
	}
	return out
}

// sparseKSM is the weak wedge of history() with the serving count recorded as
// kube-state-metrics records it: every 60 s, while the scheduler is scraped
// every 15 s.
func sparseKSM(span time.Duration, ready func(time.Time) float64) (*fakeProm, Queries) {
	h := history(span, ready, noRejections)
	q := Queries{Ready: "ready", Rejected: "rejected", StartTime: "start", Expected: "expected", ExpectedSeries: "ksm", PodLabel: "pod"}
	target := model.Metric{"pod": pod1, "namespace": "ns"}
	with := func(name string) model.Metric {
		m := target.Clone()
		m[model.MetricNameLabel] = model.LabelValue(name)
		return m
	}
	every60 := series(t0.Add(-10*time.Minute), t0.Add(span), time.Minute, func(time.Time) (float64, bool) { return 3, true })
	return &fakeProm{series: map[string]*model.SampleStream{
		"ready":    {Metric: with("ready"), Values: h.Ready[0].Values},
		"rejected": {Metric: with("rejected"), Values: h.Rejected[0].Values},
		"start":    {Metric: with("start"), Values: h.StartTime[0].Values},
		"expected": {Metric: model.Metric{}, Values: every60},
		"ksm":      {Metric: model.Metric{"__name__": "ksm", "namespace": "ns"}, Values: every60},
	}}, q
}

func fetch(t *testing.T, f *fakeProm, q Queries, from, to time.Time) *History {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	client, err := api.NewClient(api.Config{Address: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	h, err := Fetch(context.Background(), promv1.NewAPI(client), q, from, to, 0, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestSparseServingCountIsReadAtItsOwnResolution: the serving count recorded
// every 60 s beside a scheduler scraped every 15 s, over a start that is not on
// a scrape (a relative --start). Read at the scheduler's resolution with a
// lookback of two of its intervals, every 4th reading of the count was a gap: the
// weak wedge was never restarted and "as recorded" lost a quarter of its time.
// Read at its own interval, judged stale by its own interval and on aligned
// steps, the count is always known, and the report says it is coarse.
func TestSparseServingCountIsReadAtItsOwnResolution(t *testing.T) {
	wedge := t0.Add(12 * time.Minute)
	f, q := sparseKSM(2*time.Hour, func(t time.Time) float64 {
		if t.Before(wedge) {
			return 3
		}
		return 0
	})
	from := t0.Add(7*time.Second + 300*time.Millisecond)
	h := fetch(t, f, q, from, t0.Add(2*time.Hour))
	for _, r := range f.ranges {
		if r.step != time.Minute || r.lookback < 2*time.Minute || r.start.UnixMilli()%r.step.Milliseconds() != 0 {
			t.Errorf("the serving count was read from %s every %s with a lookback of %s: want its own interval (1m), a lookback of two of them, from a multiple of the step",
				r.start.Format(time.RFC3339Nano), r.step, r.lookback)
		}
	}
	res := replay(t, h, config())
	if len(res.Restarts) != 1 || res.Restarts[0].Evidence != "weak" {
		t.Errorf("restarts = %+v, want the weak wedge restarted once", res.Restarts)
	}
	if lost := h.To.Sub(wedge) - res.AsRecorded.Wedged.D(); lost > time.Minute {
		t.Errorf("as recorded: wedged %s of the %s the record shows", res.AsRecorded.Wedged.D(), h.To.Sub(wedge))
	}
	if !containsWarning(res, "serving-node count", "every 1m, coarser than --sample-interval 15s") {
		t.Errorf("warnings = %q, want the coarse serving-node count named", res.Warnings)
	}
}

func containsWarning(res *Result, parts ...string) bool {
	for _, w := range res.Warnings {
		all := true
		for _, p := range parts {
			all = all && regexp.MustCompile(regexp.QuoteMeta(p)).MatchString(w)
		}
		if all {
			return true
		}
	}
	return false
}
