package scrape

import (
	"bytes"
	"fmt"
	"testing"
)

// bigPage pads the healthy fixture with series of other families (as a scheduler
// with many histograms would export) to about size bytes.
func bigPage(tb testing.TB, size int) []byte {
	var b bytes.Buffer
	b.WriteString(readFixture(tb, "scheduler-metrics-healthy.txt"))
	b.WriteString("# HELP agentenv_scheduler_other_duration_seconds Padding family.\n# TYPE agentenv_scheduler_other_duration_seconds histogram\n")
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "agentenv_scheduler_other_duration_seconds_bucket{node=\"node-%06d\",status=\"ok\",le=\"0.25\"} %d\n", i, i)
	}
	return b.Bytes()
}

// BenchmarkExtract measures extraction throughput and allocations on 1 MB and
// 10 MB pages: B/op must not grow with the page (only the watched families are kept).
//
//	go test ./pkg/scrape -run '^$' -bench Extract -benchmem
func BenchmarkExtract(b *testing.B) {
	for _, size := range []int{1 << 20, 10 << 20} {
		page := bigPage(b, size)
		b.Run(fmt.Sprintf("%dMB", size>>20), func(b *testing.B) {
			b.SetBytes(int64(len(page)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				s, err := Extract(bytes.NewReader(page))
				if err != nil || s.Ready() != 3 {
					b.Fatalf("ready=%d err=%v", s.Ready(), err)
				}
			}
		})
	}
}
