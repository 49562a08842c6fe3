package loop

import (
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
	for i := 0; i < 20; i++ { // ten minutes as a healthy standby
		clk.Step(30 * time.Second)
		l.Alive()
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
	}
	l.setLeading(true)
	clk.Step(time.Minute)
	if ok, msg := l.Healthy(); !ok {
		t.Fatalf("a re-elected leader one minute into its first pass is reported unhealthy: %s", msg)
	}
}

// runPassResult records a successful pass at now, as runPass does.
func (l *Loop) runPassResult(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lastAlive, l.lastSuccess, l.lastErr = now, now, ""
}
