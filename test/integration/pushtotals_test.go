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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentenv/watchdog/internal/promtest"
	"github.com/agentenv/watchdog/internal/testenv"
	"github.com/agentenv/watchdog/pkg/statestore"
)

// TestPushedCountersRiseAcrossRuns: a sequence of CronJob runs pushes to the real
// Pushgateway, which the real Prometheus scrapes every second (honor_labels, as
// the docs ask), and increase() over the runs equals the number of events: ok
// passes, failed passes and observed pass durations, across a failed run and
// across running totals lost from the state ConfigMap (a counter reset). Before
// the totals were carried each push held its run's own count, and increase() saw
// one rise where there were four.
func TestPushedCountersRiseAcrossRuns(t *testing.T) {
	pg := startPushgateway(t)
	prometheus, _, err := promtest.Binaries(filepath.Join("..", ".."))
	must(t, err)
	ctx, cancel := testenv.Ctx()
	defer cancel()
	prom, err := promtest.StartScraping(ctx, prometheus, strings.TrimPrefix(pg.URL, "http://"), time.Second, t.TempDir())
	must(t, err)
	t.Cleanup(func() { _ = prom.Stop() })

	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-healthy.txt")})
	flags := []string{"--pushgateway-url", pg.URL, "--pushgateway-job", "wd-test", "--pushgateway-grouping", "namespace=" + s.ns}
	group := map[string]string{"job": "wd-test", "namespace": s.ns}
	sel := fmt.Sprintf(`{job="wd-test", namespace=%q`, s.ns)
	// run checks once and waits until Prometheus has scraped its push (so that
	// totals lost later cannot take counts Prometheus never saw with them).
	run := func(extra ...string) {
		t.Helper()
		r := s.check(append(flags, extra...)...)
		for _, w := range r.report.Warnings {
			if strings.Contains(w, "pushed") || strings.Contains(w, "totals") {
				t.Fatalf("warning: %s\n%s", w, r.stderr)
			}
		}
		pushed, ok := scrapePushgateway(t, pg).value("agentenv_watchdog_last_pass_timestamp_seconds", group)
		if !ok {
			t.Fatal("nothing pushed")
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			if v, ok := promValue(t, prom.URL, "agentenv_watchdog_last_pass_timestamp_seconds"+sel+"}", time.Now()); ok && v == pushed {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("Prometheus did not scrape the push of %v within 30s\n%s", pushed, prom.Logs())
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	run() // ok: the baseline
	start := time.Now()
	time.Sleep(1500 * time.Millisecond)       // a scrape of the baseline after start
	run()                                     // ok
	run("--nodes-service", "no-such-service") // error
	run()                                     // ok
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

	// The window runs from just before the first scrape after start (the baseline)
	// to the last scrape: every series is sampled at the scrapes' times, and
	// increase() extrapolates over a millisecond only.
	scrapes := promSampleTimes(t, prom.URL, "agentenv_watchdog_passes_total"+sel+`, result="ok"}`, start, time.Now())
	first, last := scrapes[0], scrapes[len(scrapes)-1]
	end := last
	window := fmt.Sprintf("%dms", last.Sub(first).Milliseconds()+1)
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
		got, ok := promValue(t, prom.URL, q, end)
		if !ok || math.Abs(got-c.want) > 0.01 {
			t.Errorf("%s = %v (present %v), want %v", q, got, ok, c.want)
		} else {
			t.Logf("%s = %.3f", q, got)
		}
	}
}

// promSampleTimes are the times of the samples of series q from after since to at.
func promSampleTimes(t *testing.T, base, q string, since, at time.Time) []time.Time {
	t.Helper()
	r := fmt.Sprintf("%s[%dms]", q, at.Sub(since).Milliseconds())
	var out struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Values [][2]any `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	promGet(t, base, r, at, &out)
	if out.Status != "success" || len(out.Data.Result) != 1 || len(out.Data.Result[0].Values) < 2 {
		t.Fatalf("%s: %+v", r, out)
	}
	var ts []time.Time
	for _, v := range out.Data.Result[0].Values {
		sec, ok := v[0].(float64)
		if !ok {
			t.Fatalf("%s: sample time %v", r, v[0])
		}
		ts = append(ts, time.UnixMilli(int64(math.Round(sec*1000))))
	}
	return ts
}

// promGet decodes the answer to an instant query q at at into out.
func promGet(t *testing.T, base, q string, at time.Time, out any) {
	t.Helper()
	u := base + "/api/v1/query?" + url.Values{"query": {q}, "time": {strconv.FormatFloat(float64(at.UnixMilli())/1000, 'f', 3, 64)}}.Encode()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	must(t, err)
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	must(t, json.NewDecoder(resp.Body).Decode(out))
}

// promValue is the single value of an instant query at at; ok is false when the
// result is empty.
func promValue(t *testing.T, base, q string, at time.Time) (float64, bool) {
	t.Helper()
	var out struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	promGet(t, base, q, at, &out)
	if out.Status != "success" || len(out.Data.Result) > 1 {
		t.Fatalf("%s: %s %s %+v", q, out.Status, out.Error, out.Data.Result)
	}
	if len(out.Data.Result) == 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(fmt.Sprint(out.Data.Result[0].Value[1]), 64)
	must(t, err)
	return v, true
}
