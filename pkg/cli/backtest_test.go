package cli

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"

	"github.com/agentenv/watchdog/pkg/backtest"
)

func TestBacktestFlagsValidate(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name        string
		set         func(*BacktestOptions)
		intervalSet bool
		want        []string // each a problem; none: valid
	}{
		{name: "defaults with a URL", set: func(*BacktestOptions) {}},
		{name: "no URL", set: func(o *BacktestOptions) { o.PrometheusURL = "" }, want: []string{"--prometheus-url is required"}},
		{name: "relative and absolute times", set: func(o *BacktestOptions) { o.Start, o.End = "2026-11-20T08:00:00Z", "36h" }},
		{name: "end before start", set: func(o *BacktestOptions) { o.Start, o.End = "1d", "2d" }, want: []string{"is not after --start"}},
		{name: "end in the future", set: func(o *BacktestOptions) { o.End = "2026-11-26T00:00:00Z" }, want: []string{"in the future"}},
		{name: "bad times and schedule", set: func(o *BacktestOptions) { o.Start, o.Schedule = "last tuesday", "every 5 minutes" },
			want: []string{`--start "last tuesday"`, `--schedule "every 5 minutes"`}},
		{name: "interval and schedule", intervalSet: true, set: func(o *BacktestOptions) { o.Interval, o.Schedule = 30*time.Second, "*/10 * * * *" },
			want: []string{"choose one"}},
		{name: "run mode", intervalSet: true, set: func(o *BacktestOptions) { o.Interval = 30 * time.Second }},
		{name: "pod label", set: func(o *BacktestOptions) { o.PodLabel = "\xff" }, want: []string{"--pod-label"}},
		{name: "kube-state-metrics' pod label", set: func(o *BacktestOptions) { o.KSMPodLabel = "" }, want: []string{"--ksm-pod-label"}},
		// The laptop's zone is never the CronJob's: "Local" (and "", its alias) are refused.
		{name: "time zone", set: func(o *BacktestOptions) { o.TimeZone = "Local" }, want: []string{"--schedule-timezone"}},
		{name: "unknown time zone", set: func(o *BacktestOptions) { o.TimeZone = "Mars/Olympus" }, want: []string{"--schedule-timezone"}},
		{name: "a time zone", set: func(o *BacktestOptions) { o.TimeZone = "Asia/Kolkata" }},
		// Basic auth over plain http would send the password in clear text; through
		// kubectl port-forward (loopback) it never leaves the machine.
		{name: "credentials over http", set: func(o *BacktestOptions) { o.PrometheusURL = "http://admin:hunter2@prometheus.example:9090" },
			want: []string{"--prometheus-url", "credentials", "https"}},
		{name: "credentials over https", set: func(o *BacktestOptions) { o.PrometheusURL = "https://admin:hunter2@prometheus.example" }},
		{name: "credentials over port-forward", set: func(o *BacktestOptions) { o.PrometheusURL = "http://admin:hunter2@localhost:9090" }},
		{name: "plain http without credentials", set: func(o *BacktestOptions) { o.PrometheusURL = "http://prometheus.monitoring:9090" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := BacktestOptions{PrometheusURL: "http://localhost:9090", QueryTimeout: 30 * time.Second, MaxBytes: DefaultPrometheusMaxBytes, Start: "7d", End: "now",
				Schedule: DefaultSchedule, TimeZone: "UTC", Queries: backtest.Queries{PodLabel: "pod", KSMPodLabel: "pod"}, StopGapAfter: 5 * time.Minute}
			tc.set(&o)
			err := o.Validate(now, tc.intervalSet)
			wantProblems(t, err, tc.want)
		})
	}
	o := BacktestOptions{Start: "36h", End: "2026-11-25T06:00:00Z", PrometheusURL: "http://x:9090", QueryTimeout: time.Second, MaxBytes: DefaultPrometheusMaxBytes, Schedule: DefaultSchedule, TimeZone: "UTC", Queries: backtest.Queries{PodLabel: "pod", KSMPodLabel: "pod"}, StopGapAfter: time.Minute}
	if err := o.Validate(now, false); err != nil || !o.from.Equal(now.Add(-36*time.Hour)) || !o.to.Equal(now.Add(-6*time.Hour)) {
		t.Errorf("36h → %s, 2026-11-25T06:00:00Z → %s (%v)", o.from, o.to, err)
	}
}

// TestBacktestHidesWhatAReplayCannotUse: backtest accepts check's flags (one
// configuration for both) but shows only those that change a replayed decision:
// how to reach a cluster, scrape or alert means nothing to it. --leader-lease
// changes who is judged: the replay tells the leader from recorded readiness.
func TestBacktestHidesWhatAReplayCannotUse(t *testing.T) {
	root := NewRootCommand(io.Discard, io.Discard)
	bt, _, err := root.Find([]string{"backtest"})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"kubeconfig", "context", "scrape-via", "metrics-port", "scrape-timeout", "slack-webhook-url", "alertmanager-url", "dry-run", "shadow"} {
		if f := bt.Flags().Lookup(name); f == nil || !f.Hidden {
			t.Errorf("backtest --%s: %+v, want accepted and hidden", name, f)
		}
	}
	for _, name := range []string{"prometheus-url", "start", "wedged-for", "confirm-window", "max-restarts", "restart-backoff", "startup-grace", "namespace", "leader-lease", "pod-ready-series", "expected-series"} {
		if f := bt.Flags().Lookup(name); f == nil || f.Hidden {
			t.Errorf("backtest --%s: %+v, want shown", name, f)
		}
	}
}

// TestBacktestPodReadyNeedsLeaderLease: --pod-ready-series without
// --leader-lease would be read by nothing: a usage error, before any query.
func TestBacktestPodReadyNeedsLeaderLease(t *testing.T) {
	var stderr strings.Builder
	code := ExecuteContext(t.Context(), []string{"backtest", "--prometheus-url", "http://127.0.0.1:1", "--pod-ready-series", `kube_pod_status_ready{condition="true"}`},
		io.Discard, &stderr)
	if code == 0 || !strings.Contains(stderr.String(), "--pod-ready-series") || !strings.Contains(stderr.String(), "--leader-lease") {
		t.Errorf("exit %d, stderr %q: want a usage error naming both flags", code, stderr.String())
	}
}

// TestBacktestBoundsPrometheusAnswers: backtest reads what a Prometheus (or
// whatever answers at --prometheus-url) sends: each answer is read up to
// --prometheus-max-bytes, and a redirect is refused, so neither a huge answer
// nor another host can be made to answer for it.
func TestBacktestBoundsPrometheusAnswers(t *testing.T) {
	huge := `{"status":"success","data":{"resultType":"vector","result":[` + strings.Repeat(`{"metric":{"a":"b"},"value":[1,"1"]},`, 200000) + `{"metric":{},"value":[1,"1"]}]}}`
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		_, _ = io.WriteString(w, `{"status":"success","data":{"resultType":"vector","result":[]}}`)
	}))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.RawQuery+r.URL.Path, "redirect") || r.FormValue("query") == "redirect" {
			http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, huge)
	}))
	defer srv.Close()
	bo := BacktestOptions{PrometheusURL: srv.URL, QueryTimeout: 10 * time.Second, MaxBytes: 1 << 20}
	client, err := loadedClient(&bo) // the defaults: a redirect is prometheus/common's to follow
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, _, _, err := promv1.NewAPI(client).Query(ctx, "up", time.Now()); err == nil || !strings.Contains(err.Error(), "exceeds") {
		t.Errorf("an answer of %d bytes, bound 1 MiB: %v", len(huge), err)
	}
	bo.MaxBytes = 64 << 20
	if client, err = loadedClient(&bo); err != nil {
		t.Fatal(err)
	}
	if v, _, _, err := promv1.NewAPI(client).Query(ctx, "up", time.Now()); err != nil || v.String() == "" {
		t.Errorf("the same answer within the bound: %v", err)
	}
	if _, _, _, err := promv1.NewAPI(client).Query(ctx, "redirect", time.Now()); err == nil || elsewhere.Load() != 0 {
		t.Errorf("a redirect: %v, %d request(s) elsewhere", err, elsewhere.Load())
	}
}

// wantProblems checks a validation error against the problems it must name: none
// wants no error. It reports whether there was an error to look at further.
func wantProblems(t *testing.T, err error, want []string) bool {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("want valid, got %v", err)
		}
		return false
	}
	if err == nil {
		t.Fatalf("want %q, got no error", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
	return true
}

// A URL that may carry credentials is never echoed when it does not parse:
// url.Parse's error quotes it whole, password included.
func TestMalformedURLWithCredentialsIsNotEchoed(t *testing.T) {
	const bad = "http://admin:hunter2@prometheus.example:badport"
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	bt := BacktestOptions{PrometheusURL: bad, QueryTimeout: 30 * time.Second, MaxBytes: DefaultPrometheusMaxBytes, Start: "7d", End: "now",
		Schedule: DefaultSchedule, TimeZone: "UTC", Queries: backtest.Queries{PodLabel: "pod", KSMPodLabel: "pod"}, StopGapAfter: 5 * time.Minute}
	push := PushOptions{URL: bad, Job: "watchdog", Timeout: time.Second}
	for flag, err := range map[string]error{"--prometheus-url": bt.Validate(now, false), "--pushgateway-url": push.Validate()} {
		if err == nil || !strings.Contains(err.Error(), flag) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s %s: want an error naming the flag without the password, got %v", flag, bad, err)
		}
	}
}

// Credentials in --pushgateway-url are refused once, whatever the scheme: the push
// sends none, so the plain-http refusal would only repeat the point.
func TestPushgatewayURLCredentialsRefusedOnce(t *testing.T) {
	for _, u := range []string{"http://user:pass@pushgateway.monitoring:9091", "https://user:pass@pushgateway.example"} {
		err := (&PushOptions{URL: u, Job: "watchdog", Timeout: time.Second}).Validate()
		var ue *UsageError
		if !errors.As(err, &ue) || len(ue.problems) != 1 || !strings.Contains(err.Error(), "credentials in the URL are not supported") {
			t.Errorf("%s: want one problem naming the credentials, got %v", u, err)
		}
		if err != nil && strings.Contains(err.Error(), "pass") {
			t.Errorf("%s: the password is quoted back: %v", u, err)
		}
	}
}
