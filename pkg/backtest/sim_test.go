package backtest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/robfig/cron/v3"
	"github.com/rs/zerolog"

	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/check"
	"github.com/agentenv/watchdog/pkg/decide"
)

// A narrow test of the replay's world without Prometheus (test/backtest runs the
// command against the real API): a history built in memory.

var t0 = time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC)

func series(from, to time.Time, step time.Duration, v func(time.Time) (float64, bool)) []model.SamplePair {
	var out []model.SamplePair
	for t := from; t.Before(to); t = t.Add(step) {
		if x, ok := v(t); ok {
			out = append(out, model.SamplePair{Timestamp: model.TimeFromUnixNano(t.UnixNano()), Value: model.SampleValue(x)})
		}
	}
	return out
}

// history is one pod over [t0, t0+span) scraped every 15 s with 3 serving nodes.
func history(span time.Duration, ready func(time.Time) float64, rejected func(time.Time) (float64, bool)) *History {
	end := t0.Add(span)
	always := func(v float64) func(time.Time) (float64, bool) {
		return func(time.Time) (float64, bool) { return v, true }
	}
	tg := &Target{Pod: "sched-1", Key: `{pod="sched-1"}`, Namespace: "ns",
		Ready:     series(t0, end, 15*time.Second, func(t time.Time) (float64, bool) { return ready(t), true }),
		Rejected:  series(t0, end, 15*time.Second, rejected),
		StartTime: series(t0, end, 15*time.Second, always(float64(t0.Add(-time.Hour).Unix())))}
	return &History{From: t0, To: end, Targets: []*Target{tg}, Step: 15 * time.Second, ScrapeInterval: 15 * time.Second, MaxAge: 30 * time.Second,
		Expected: series(t0, end, 15*time.Second, always(3))}
}

func config() Config {
	every5, _ := cron.ParseStandard("*/5 * * * *")
	return Config{
		Check: check.Options{
			Decide: decide.Config{StartupGrace: 2 * time.Minute, WedgedFor: 150 * time.Second, ConfirmWindow: 90 * time.Second,
				MaxRestarts: 3, RestartWindow: time.Hour, RestartMethod: decide.MethodDelete, MaxPods: 10, ClaimTimeout: 3 * time.Minute},
			Plan:           alert.PlanConfig{RealertInterval: time.Hour, BlindAfter: 3, WedgedFor: 150 * time.Second, Namespace: "ns"},
			SampleInterval: 15 * time.Second, Namespace: "ns", StateConfigMap: "backtest",
		},
		RestartMethod: decide.MethodDelete, Deployment: "sched", Timeout: 3 * time.Minute,
		Schedule: every5, ScheduleSpec: "*/5 * * * *", StopGap: every5, StopGapAfter: 5 * time.Minute, Log: zerolog.Nop(),
	}
}

// TestWeakWedgeRestartedOnceThenReplacementHealthy: ready 0 with no rejections
// from +12m: the watchdog restarts once after --wedged-for (weak evidence), the
// replacement reads healthy, nothing is restarted again; the stop-gap restarts
// once too, later.
func TestWeakWedgeRestartedOnceThenReplacementHealthy(t *testing.T) {
	wedge := t0.Add(12 * time.Minute)
	h := history(2*time.Hour, func(t time.Time) float64 {
		if t.Before(wedge) {
			return 3
		}
		return 0
	}, func(time.Time) (float64, bool) { return 0, false })
	res, err := Run(context.Background(), h, config())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Restarts) != 1 || res.Restarts[0].Evidence != "weak" {
		t.Fatalf("restarts = %+v, want one on weak evidence", res.Restarts)
	}
	// Seen at +15m (the first run after the drop), which samples on until
	// --wedged-for (2m30s) of observations: it fits the run's deadline.
	if want := t0.Add(17*time.Minute + 30*time.Second); !res.Restarts[0].At.Equal(want) {
		t.Errorf("restart at %s, want %s", res.Restarts[0].At, want)
	}
	if len(res.StopGap.Restarts) != 1 || !res.StopGap.Restarts[0].At.Equal(t0.Add(20*time.Minute)) {
		t.Errorf("stop-gap restarts = %+v, want one at +20m", res.StopGap.Restarts)
	}
	if res.Summary.Wedged >= res.AsRecorded.Wedged || res.AsRecorded.Wedges[0].HealedBy != "still wedged at the end" {
		t.Errorf("wedged %s (watchdog) vs %s (as recorded: %+v)", res.Summary.Wedged.D(), res.AsRecorded.Wedged.D(), res.AsRecorded.Wedges)
	}
}

// TestReplacementsAreNamedApart: restarting a replacement makes a new one, and
// a world restart of a pod that is not listed does nothing.
func TestReplacementsAreNamedApart(t *testing.T) {
	h := history(time.Hour, func(time.Time) float64 { return 0 }, func(time.Time) (float64, bool) { return 0, false })
	w := NewWorld(h)
	at := t0.Add(10 * time.Minute)
	if !w.Restart("ns/sched-1", at) {
		t.Fatal("restart of the recorded pod refused")
	}
	pods := w.Pods(at.Add(time.Minute))
	if len(pods) != 1 || pods[0].Name != "sched-1~1" || !pods[0].Replacement || pods[0].Ready != 3 {
		t.Fatalf("pods after a restart = %+v, want the replacement sched-1~1 reading 3", pods)
	}
	if w.Restart("ns/sched-1", at.Add(2*time.Minute)) {
		t.Error("the restarted pod is gone; restarting it again must fail")
	}
	if !w.Restart("ns/sched-1~1", at.Add(3*time.Minute)) {
		t.Fatal("restart of the replacement refused")
	}
	if pods := w.Pods(at.Add(4 * time.Minute)); len(pods) != 1 || pods[0].Name != "sched-1~2" {
		t.Errorf("pods = %+v, want sched-1~2", pods)
	}
}

// TestStopGapPatience: --stop-gap-after is the stop-gap's patience, in its
// replay and in the report's words: ready 0 read at +15m restarts at +25m with
// 10m, and the text says 10m, not the default's 5 min.
func TestStopGapPatience(t *testing.T) {
	wedge := t0.Add(12 * time.Minute)
	h := history(time.Hour, func(t time.Time) float64 {
		if t.Before(wedge) {
			return 3
		}
		return 0
	}, func(time.Time) (float64, bool) { return 0, false })
	cfg := config()
	cfg.StopGapAfter = 10 * time.Minute
	res, err := Run(context.Background(), h, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.StopGap.Restarts) == 0 || !res.StopGap.Restarts[0].At.Equal(t0.Add(25*time.Minute)) {
		t.Errorf("stop-gap restarts = %+v, want the first at +25m", res.StopGap.Restarts)
	}
	var text strings.Builder
	if err := res.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "ready 0 on runs 10m apart") || strings.Contains(text.String(), "5 min") {
		t.Errorf("the stop-gap's section does not name its 10m patience:\n%s", text.String())
	}
}
