package metrics

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/agentenv/watchdog/pkg/check"
	"github.com/agentenv/watchdog/pkg/state"
)

// TestTotalsCarryOverRuns: three runs' counts add up, series by series (a
// histogram's count, sum and buckets too), through the stored form; gauges are
// left as the run set them.
func TestTotalsCarryOverRuns(t *testing.T) {
	stored := ""
	var fams map[string]*dto.MetricFamily
	for i, restarts := range []int{1, 0, 2} {
		m := New(Options{})
		rep := &check.Report{}
		for range restarts {
			rep.Restarts = append(rep.Restarts, check.RestartReport{Outcome: state.RestartDone})
		}
		m.Observe(rep, nil, time.Duration(i+1)*time.Second, time.Unix(int64(1000+i), 0))
		var err error
		fams, err = pushedTo(t, m, func(_ context.Context, f func(string) (string, error)) error {
			var err error
			stored, err = f(stored)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			key := f.GetName() + labelKey(m.GetLabel())
			switch {
			case m.GetCounter() != nil:
				got[key] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				got[key] = m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				got[key+"_count"] = float64(m.GetHistogram().GetSampleCount())
				got[key+"_sum"] = m.GetHistogram().GetSampleSum()
				got[key+"_bucket_le_1"] = float64(m.GetHistogram().GetBucket()[4].GetCumulativeCount())
			}
		}
	}
	for k, want := range map[string]float64{
		`agentenv_watchdog_restarts_total{outcome="done"}`:    3,
		`agentenv_watchdog_restarts_total{outcome="failed"}`:  0,
		`agentenv_watchdog_passes_total{result="ok"}`:         3,
		`agentenv_watchdog_pass_duration_seconds_count`:       3,
		`agentenv_watchdog_pass_duration_seconds_sum`:         6,
		`agentenv_watchdog_pass_duration_seconds_bucket_le_1`: 1, // the first run's 1s
		`agentenv_watchdog_last_pass_timestamp_seconds`:       1002,
	} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v", k, got[k], want)
		}
	}
}

// TestDecodeTotalsRefusesWhatNoCounterHolds: unreadable, foreign-version or
// negative totals are an error (the run starts them over and says so).
func TestDecodeTotalsRefusesWhatNoCounterHolds(t *testing.T) {
	for _, raw := range []string{"{", `{"version":2,"series":{}}`, `{"version":1,"series":{"x":-1}}`} {
		if _, err := DecodeTotals(raw); err == nil || !strings.Contains(err.Error(), "running totals") {
			t.Errorf("%s: %v", raw, err)
		}
	}
}

// pushedTo runs m's Push against a recording Pushgateway stand-in with totals and
// returns the families it received and Push's error.
func pushedTo(t *testing.T, m *Metrics, totals func(context.Context, func(string) (string, error)) error) (map[string]*dto.MetricFamily, error) {
	t.Helper()
	got := map[string]*dto.MetricFamily{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dec := expfmt.NewDecoder(r.Body, expfmt.ResponseFormat(r.Header))
		for {
			var f dto.MetricFamily
			if err := dec.Decode(&f); err != nil {
				break
			}
			got[f.GetName()] = &f
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	err := m.Push(context.Background(), PushConfig{URL: srv.URL, Job: "watchdog", Timeout: 5 * time.Second, Totals: totals})
	return got, err
}

// onePass is metrics after one successful pass.
func onePass() *Metrics {
	m := New(Options{})
	m.Observe(&check.Report{}, nil, time.Second, time.Unix(1000, 0))
	return m
}

// TestPushWithoutSavedTotalsSendsNoCounters: totals that could not be saved are not
// pushed, nor is this run's own count in their place (either would drop below the
// totals pushed before: a counter reset, counted as a burst); the gauges are, and
// the error says what was lost.
func TestPushWithoutSavedTotalsSendsNoCounters(t *testing.T) {
	got, err := pushedTo(t, onePass(), func(context.Context, func(string) (string, error)) error {
		return errors.New("update state ConfigMap: the server is unavailable")
	})
	if err == nil || !strings.Contains(err.Error(), "counters not pushed") {
		t.Errorf("error %v, want one saying the counters were not pushed", err)
	}
	for name, f := range got {
		if f.GetType() == dto.MetricType_COUNTER || f.GetType() == dto.MetricType_HISTOGRAM {
			t.Errorf("%s pushed although its total was not saved", name)
		}
	}
	if got["agentenv_watchdog_last_pass_timestamp_seconds"] == nil {
		t.Errorf("the gauges were not pushed: %v", got)
	}
}

// TestPushStartsUnreadableTotalsOver: an unreadable stored copy is replaced by this
// run's counts (a counter reset to Prometheus), pushed, and said.
func TestPushStartsUnreadableTotalsOver(t *testing.T) {
	var stored string
	got, err := pushedTo(t, onePass(), func(_ context.Context, f func(string) (string, error)) error {
		var err error
		stored, err = f(`{"version":1,"series":{"agentenv_watchdog_passes_total{result=\"ok\"}":"many"}}`)
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "counter reset") {
		t.Errorf("error %v, want one naming the counter reset", err)
	}
	if v := got["agentenv_watchdog_passes_total"]; v == nil {
		t.Fatal("passes_total not pushed")
	}
	if saved, derr := DecodeTotals(stored); derr != nil || saved[`agentenv_watchdog_passes_total{result="ok"}`] != 1 {
		t.Errorf("stored %s (%v), want this run's one pass", stored, derr)
	}
}
