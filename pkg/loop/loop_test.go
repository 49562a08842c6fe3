package loop

import (
	"context"
	"errors"
	"strings"

	"github.com/agentenv/watchdog/pkg/check"
	"testing"
	"time"

	"github.com/rs/zerolog"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/agentenv/watchdog/pkg/metrics"
)

// A standby that wins the election after a long wait is a fresh leader: /healthz
// must give its first pass the usual time (a pass confirming a wedge takes 90 s
// or more), not fail at once because no pass of its own completed since the
// process started, which would have the liveness probe kill it mid-confirmation.
// A leader whose passes then stop completing must still be reported.
func TestNewLeaderGetsAFreshHealthClock(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	l := New(30*time.Second, 3*time.Minute, nil, metrics.New(metrics.Options{}), clk, zerolog.Nop())
	for i := 0; i < 20; i++ { // ten minutes as a healthy standby, the leader passing
		clk.Step(30 * time.Second)
		l.Alive()
		l.SawPass()
	}
	if ok, msg := l.Healthy(); !ok {
		t.Fatalf("standby: %s", msg)
	}
	l.setLeading(true)
	clk.Step(time.Minute) // its first pass is confirming a wedge
	if ok, msg := l.Healthy(); !ok {
		t.Fatalf("a new leader one minute into its first pass is reported unhealthy: %s", msg)
	}
	clk.Step(l.Staleness())
	if ok, _ := l.Healthy(); ok {
		t.Fatal("a leader with no pass completed for longer than the staleness limit is reported healthy")
	}

	// The same after losing and regaining leadership: an old success does not count.
	l.runPassResult(clk.Now())
	l.setLeading(false)
	for i := 0; i < 20; i++ {
		clk.Step(30 * time.Second)
		l.Alive()
		l.SawPass()
	}
	l.setLeading(true)
	clk.Step(time.Minute)
	if ok, msg := l.Healthy(); !ok {
		t.Fatalf("a re-elected leader one minute into its first pass is reported unhealthy: %s", msg)
	}
}

// A standby whose election loop is alive but sees no pass completed anywhere (the
// leader holds the Lease and does nothing) for the staleness limit fails /healthz,
// and the unhealthy gauge names why; a pass seen again heals it.
func TestStandbyFailsWhenNoPassCompletesAnywhere(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	m := metrics.New(metrics.Options{})
	l := New(30*time.Second, 3*time.Minute, nil, m, clk, zerolog.Nop())
	for range 20 {
		clk.Step(30 * time.Second)
		l.Alive()
	}
	ok, msg := l.Healthy()
	if ok || !strings.Contains(msg, "no pass completed anywhere") {
		t.Fatalf("a standby that saw no pass anywhere for 10 minutes: healthy %v, %q", ok, msg)
	}
	if v := unhealthy(t, m); v != "no-pass-anywhere" {
		t.Errorf("agentenv_watchdog_unhealthy says %q, want no-pass-anywhere", v)
	}
	l.SawPass()
	if ok, msg := l.Healthy(); !ok || unhealthy(t, m) != "" {
		t.Fatalf("after a pass seen: healthy %v %q, gauge %q", ok, msg, unhealthy(t, m))
	}
}

// unhealthy is the reason agentenv_watchdog_unhealthy gives (its series at 1), "" for none.
func unhealthy(t *testing.T, m *metrics.Metrics) string {
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		for _, s := range f.GetMetric() {
			if f.GetName() == "agentenv_watchdog_unhealthy" && s.GetGauge().GetValue() == 1 {
				return s.GetLabel()[0].GetValue()
			}
		}
	}
	return ""
}

// runPassResult records a successful pass at now, as runPass does.
func (l *Loop) runPassResult(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lastAlive, l.lastSuccess, l.lastErr = now, now, ""
}

// The passes of `watchdog run --interval 30s` over an hour of the nodes'
// EndpointSlices changing every period (from a roll every few minutes to a
// change every second): a change is looked at within Settle when the last pass
// is at least half an interval old, and never later than the plain interval;
// passes never come closer than half an interval, so an hour of churn costs at
// most twice the plain interval's passes (120), whatever the period.
func TestScheduleEarlyPassesAreDebouncedAndBounded(t *testing.T) {
	const interval, settle = 30 * time.Second, 2 * time.Second
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, period := range []time.Duration{time.Second, 3 * time.Second, 7 * time.Second, 16 * time.Second, 31 * time.Second, 3 * time.Minute} {
		passes, start := 1, t0
		s := schedule{interval: interval, settle: settle, start: start}
		var worstSeen time.Duration
		pending := time.Time{} // the first change not yet looked at
		for now := t0; now.Before(t0.Add(time.Hour)); now = now.Add(time.Second) {
			if !now.Before(s.due()) {
				if gap := now.Sub(start); gap < interval/2 {
					t.Fatalf("period %s: passes %s apart, want at least %s", period, gap, interval/2)
				}
				if !pending.IsZero() {
					worstSeen = max(worstSeen, now.Sub(pending))
					pending = time.Time{}
				}
				passes++
				start = now
				s = schedule{interval: interval, settle: settle, start: start}
			}
			if now.Sub(t0)%period == 0 {
				s.changed(now)
				if pending.IsZero() {
					pending = now
				}
			}
		}
		if passes > 2*int(time.Hour/interval)+1 {
			t.Errorf("period %s: %d passes in an hour, want at most twice the plain interval's %d", period, passes, time.Hour/interval)
		}
		if worstSeen > interval/2+settle {
			t.Errorf("period %s: a change waited %s for a pass, want at most %s", period, worstSeen, interval/2+settle)
		}
		t.Logf("period %-6s %3d passes/h (plain interval: %d), a change waits at most %s for a pass", period, passes, time.Hour/interval, worstSeen)
	}
}

// A change of the nodes' EndpointSlices wakes a running loop: the next pass
// starts Settle after it, not an interval after the last pass; without a
// change the loop keeps its interval.
func TestWakeStartsAnEarlyPass(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	t0 := clk.Now()
	starts := make(chan time.Time, 10)
	wake := make(chan struct{})
	l := New(30*time.Second, 3*time.Minute, func(context.Context) (*check.Report, error) {
		starts <- clk.Now()
		return &check.Report{}, nil
	}, metrics.New(metrics.Options{}), clk, zerolog.Nop())
	l.Wake, l.Settle = wake, 2*time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go l.Lead(ctx)
	if got := <-starts; !got.Equal(t0) {
		t.Fatalf("first pass at %s, want at once", got.Sub(t0))
	}
	waitFor(t, func() bool { return clk.Waiters() == 1 })
	clk.Step(20 * time.Second)
	wake <- struct{}{}
	waitFor(t, func() bool { return clk.Waiters() == 2 }) // the early pass's timer
	clk.Step(2 * time.Second)
	select {
	case got := <-starts:
		if d := got.Sub(t0); d != 22*time.Second {
			t.Fatalf("early pass %s after the first, want 22s (a change at 20s, settled 2s)", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a change 20s after a pass started no pass 2s later")
	}
	// No change since: the next pass is an interval after the early one.
	waitFor(t, func() bool { return clk.Waiters() >= 1 })
	clk.Step(29 * time.Second)
	select {
	case got := <-starts:
		t.Fatalf("a pass %s after the early one, with no change", got.Sub(t0.Add(22*time.Second)))
	case <-time.After(200 * time.Millisecond):
	}
	clk.Step(time.Second)
	select {
	case got := <-starts:
		if d := got.Sub(t0); d != 52*time.Second {
			t.Fatalf("pass at %s, want 52s", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no pass an interval after the early one")
	}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting for the loop")
		}
		time.Sleep(time.Millisecond)
	}
}

// A dry run writes no state, so a standby never sees a pass: it must not fail
// /healthz for it (the kubelet would restart every standby forever).
func TestDryRunStandbySkipsNoPassAnywhere(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	m := metrics.New(metrics.Options{})
	l := New(30*time.Second, 3*time.Minute, nil, m, clk, zerolog.Nop())
	l.DryRun = true
	for range 20 {
		clk.Step(30 * time.Second)
		l.Alive()
	}
	if ok, msg := l.Healthy(); !ok || unhealthy(t, m) != "" {
		t.Fatalf("a dry-run standby 10 minutes in: healthy %v %q, gauge %q", ok, msg, unhealthy(t, m))
	}
}

// A standby that cannot read the state ConfigMap says so, not that no pass ran.
func TestStandbyStateUnreadable(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	m := metrics.New(metrics.Options{})
	l := New(30*time.Second, 3*time.Minute, nil, m, clk, zerolog.Nop())
	for range 20 {
		clk.Step(30 * time.Second)
		l.Alive()
		l.SawState(errors.New("configmaps is forbidden"))
	}
	ok, msg := l.Healthy()
	if ok || !strings.Contains(msg, "forbidden") || unhealthy(t, m) != "state-unreadable" {
		t.Fatalf("a standby that cannot read the state: healthy %v %q, gauge %q", ok, msg, unhealthy(t, m))
	}
	l.SawState(nil)
	if _, _ = l.Healthy(); unhealthy(t, m) != "no-pass-anywhere" {
		t.Fatalf("state read again but unchanged: gauge %q, want no-pass-anywhere", unhealthy(t, m))
	}
}
