package backtest

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkReplayDay replays a day of history, and measures its summary alone
// (the world's condition at every reading, each asking decide.Judged), for one
// scheduler pod and an HA scheduler of three.
func BenchmarkReplayDay(b *testing.B) {
	for _, replicas := range []int{1, 3} {
		h := history(24*time.Hour, func(time.Time) float64 { return 3 }, noRejections)
		cfg := config()
		if replicas > 1 {
			h = ha(24*time.Hour, func(time.Time) float64 { return 3 })
			cfg.Check.Decide.LeaderLease = "sched"
		}
		b.Run(fmt.Sprintf("replicas=%d/run", replicas), func(b *testing.B) {
			for range b.N {
				if _, err := Run(context.Background(), h, cfg); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("replicas=%d/summary", replicas), func(b *testing.B) {
			c := newColumn(b, h, cfg)
			for range b.N {
				c.summary()
			}
		})
	}
}
