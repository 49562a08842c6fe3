package decide_test

import (
	"testing"
	"time"

	"github.com/agentenv/watchdog/internal/podtest"
	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/state"
)

// BenchmarkDecideHealthyPass is the decision of one `watchdog run` pass of a
// healthy scheduler whose record holds an hour of passes every 30 s: the
// decision's part of run mode's CPU per pass (docs/performance.md).
//
//	go test ./pkg/decide -run '^$' -bench DecideHealthyPass -benchmem
func BenchmarkDecideHealthyPass(b *testing.B) {
	cfg := testConfig()
	s := state.New()
	at := t0
	for range 120 {
		s, _ = decide.Decide(observe(at, 3, schedPod("sched-a", "uid-a", podtest.Sample(3, 0))), s, cfg)
		at = at.Add(30 * time.Second)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s, _ = decide.Decide(observe(at, 3, schedPod("sched-a", "uid-a", podtest.Sample(3, 0))), s, cfg)
		at = at.Add(30 * time.Second)
	}
}
