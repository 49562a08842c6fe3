package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentenv/watchdog/internal/promtest"
	"github.com/agentenv/watchdog/internal/testenv"
	"github.com/agentenv/watchdog/pkg/statestore"
)

// TestPushedCountersRiseAcrossRuns: a sequence of CronJob runs pushes to the real
// Pushgateway; what Prometheus would scrape from it after each run (its real
// exposition, a minute apart) is loaded into the real Prometheus, and increase()
// over the runs equals the number of events: passes, failed passes and observed
// pass durations, across a failed run and across running totals lost from the
// state ConfigMap (a counter reset). Before the totals were carried each push held
// its run's own count, and increase() saw one rise where there were four.
func TestPushedCountersRiseAcrossRuns(t *testing.T) {
	pg := startPushgateway(t)
	prometheus, promtool, err := promtest.Binaries(filepath.Join("..", ".."))
	must(t, err)
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-healthy.txt")})
	flags := []string{"--pushgateway-url", pg.URL, "--pushgateway-job", "wd-test", "--pushgateway-grouping", "namespace=" + s.ns}

	om := &promtest.OpenMetrics{}
	t0 := time.Now().Add(-time.Hour).Truncate(time.Minute)
	scrapes := 0
	scrape := func() {
		t.Helper()
		at := t0.Add(time.Duration(scrapes) * time.Minute)
		scrapes++
		for name, f := range scrapePushgateway(t, pg) {
			for _, m := range f.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["namespace"] != s.ns {
					continue
				}
				switch f.GetType() {
				case dto.MetricType_COUNTER:
					om.Add(name, "unknown", labels, at, m.GetCounter().GetValue())
				case dto.MetricType_HISTOGRAM:
					om.Add(name+"_count", "unknown", labels, at, float64(m.GetHistogram().GetSampleCount()))
				}
			}
		}
	}
	run := func(extra ...string) {
		t.Helper()
		r := s.check(append(flags, extra...)...)
		for _, w := range r.report.Warnings {
			if strings.Contains(w, "pushed") || strings.Contains(w, "totals") {
				t.Fatalf("warning: %s\n%s", w, r.stderr)
			}
		}
		scrape()
	}

	run()                                     // ok: the baseline Prometheus first sees
	run()                                     // ok
	run("--nodes-service", "no-such-service") // error
	run()                                     // ok
	ctx, cancel := testenv.Ctx()
	defer cancel()
	cms := env.Client.CoreV1().ConfigMaps(s.ns)
	cm, err := cms.Get(ctx, "agentenv-scheduler-watchdog", metav1.GetOptions{})
	must(t, err)
	if _, ok := cm.Data[statestore.MetricsKey]; !ok {
		t.Fatalf("no running totals under %s: %v", statestore.MetricsKey, cm.Data)
	}
	delete(cm.Data, statestore.MetricsKey) // the totals lost: a counter reset
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	must(t, err)
	run() // ok
	run() // ok

	prom, err := promtest.Start(ctx, prometheus, promtool, om.Bytes(), t.TempDir())
	must(t, err)
	t.Cleanup(func() { _ = prom.Stop() })
	// The window starts just after the first scrape: increase() counts the events of
	// the runs after it, extrapolated over a millisecond.
	last := t0.Add(time.Duration(scrapes-1) * time.Minute)
	window := fmt.Sprintf("%dms", (time.Duration(scrapes-1)*time.Minute + time.Millisecond).Milliseconds())
	sel := fmt.Sprintf(`{job="wd-test", namespace=%q`, s.ns)
	for _, c := range []struct {
		series string
		want   float64
	}{
		{`agentenv_watchdog_passes_total` + sel + `, result="ok"}`, 4},
		{`agentenv_watchdog_passes_total` + sel + `, result="error"}`, 1},
		{`agentenv_watchdog_pass_duration_seconds_count` + sel + `}`, 5},
		{`agentenv_watchdog_restarts_total` + sel + `, outcome="done"}`, 0},
	} {
		q := fmt.Sprintf("sum(increase(%s[%s]))", c.series, window)
		if got := promQuery(t, prom.URL, q, last); math.Abs(got-c.want) > 0.01 {
			t.Errorf("%s = %v, want %v", q, got, c.want)
		}
	}
}

// promQuery is the single value of an instant query at at.
func promQuery(t *testing.T, base, q string, at time.Time) float64 {
	t.Helper()
	u := base + "/api/v1/query?" + url.Values{"query": {q}, "time": {strconv.FormatInt(at.Unix(), 10)}}.Encode()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	must(t, err)
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	var out struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	must(t, json.NewDecoder(resp.Body).Decode(&out))
	if out.Status != "success" || len(out.Data.Result) != 1 {
		t.Fatalf("%s: %s %s %+v", q, out.Status, out.Error, out.Data.Result)
	}
	v, err := strconv.ParseFloat(fmt.Sprint(out.Data.Result[0].Value[1]), 64)
	must(t, err)
	return v
}
