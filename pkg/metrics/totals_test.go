package metrics

import (
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/agentenv/watchdog/pkg/check"
	"github.com/agentenv/watchdog/pkg/state"
)

// TestTotalsCarryOverRuns: three runs' counts add up, series by series (a
// histogram's count, sum and buckets too), through the stored form; gauges are
// left as the run set them.
func TestTotalsCarryOverRuns(t *testing.T) {
	stored := ""
	var fams []*dto.MetricFamily
	for i, restarts := range []int{1, 0, 2} {
		m := New(Options{})
		rep := &check.Report{}
		for range restarts {
			rep.Restarts = append(rep.Restarts, check.RestartReport{Outcome: state.RestartDone})
		}
		m.Observe(rep, nil, time.Duration(i+1)*time.Second, time.Unix(int64(1000+i), 0))
		var err error
		if fams, err = m.pushed(); err != nil {
			t.Fatal(err)
		}
		prev, err := DecodeTotals(stored)
		if err != nil {
			t.Fatal(err)
		}
		totals := prev.Plus(countsOf(fams))
		if stored, err = totals.Encode(); err != nil {
			t.Fatal(err)
		}
		carry(fams, totals)
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
