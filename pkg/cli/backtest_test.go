package cli

import (
	"io"
	"strings"
	"testing"
	"time"
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
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := BacktestOptions{PrometheusURL: "http://localhost:9090", QueryTimeout: 30 * time.Second, Start: "7d", End: "now",
				Schedule: DefaultSchedule, PodLabel: "pod", StopGapAfter: 5 * time.Minute}
			tc.set(&o)
			err := o.Validate(now, tc.intervalSet)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want %q, got no error", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	o := BacktestOptions{Start: "36h", End: "2026-11-25T06:00:00Z", PrometheusURL: "http://x:9090", QueryTimeout: time.Second, Schedule: DefaultSchedule, PodLabel: "pod", StopGapAfter: time.Minute}
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
