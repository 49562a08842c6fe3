package evidence

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
)

// TestRingKeepsTheNewest: the ConfigMap keeps the newest MaxBundles bundles and
// stays under its size bound however large the bundles, and leaves keys that are
// no bundle's alone.
func TestRingKeepsTheNewest(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	data := map[string]string{"README": "kept"}
	var keys []string
	for i := range 8 {
		k := Key(t0.Add(time.Duration(i)*time.Minute), "p")
		keys = append(keys, k)
		data = ring(data, k, "{}")
	}
	if len(data) != MaxBundles+1 || data["README"] != "kept" {
		t.Fatalf("ring holds %d keys: %v", len(data), data)
	}
	for i, k := range keys {
		if _, ok := data[k]; ok != (i >= len(keys)-MaxBundles) {
			t.Errorf("bundle %d (%s) kept: %v", i, k, ok)
		}
	}
	// Bundles at the log bound: the ring drops the oldest to stay under its size.
	big := strings.Repeat("x", DefaultLogBytes*3)
	data = nil
	for i := range MaxBundles {
		data = ring(data, Key(t0.Add(time.Duration(i)*time.Minute), "p"), big)
	}
	size := 0
	for k, v := range data {
		size += len(k) + len(v)
	}
	if size > maxRingBytes || len(data) == 0 {
		t.Errorf("ring of %d bundles, %d bytes, bound %d", len(data), size, maxRingBytes)
	}
	if _, ok := data[Key(t0.Add(time.Duration(MaxBundles-1)*time.Minute), "p")]; !ok {
		t.Error("the newest bundle was dropped")
	}
}

// TestKeysSortByTime: keys sort as their times do, across days and months.
func TestKeysSortByTime(t *testing.T) {
	a := Key(time.Date(2026, 9, 30, 23, 59, 59, 0, time.UTC), "zz")
	b := Key(time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC), "aa")
	if a >= b {
		t.Errorf("%s sorts after %s", a, b)
	}
}

// kubeletLog serves a log as the kubelet does: the last tailLines lines, then at
// most limitBytes of them counted from the first.
type kubeletLog struct {
	log   string
	reads []int64 // the tailLines of each read
}

func (k *kubeletLog) PodLog(_ context.Context, _, _ string, o *corev1.PodLogOptions) (io.ReadCloser, error) {
	k.reads = append(k.reads, *o.TailLines)
	lines := strings.SplitAfter(k.log, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if n := int(*o.TailLines); n < len(lines) {
		lines = lines[len(lines)-n:]
	}
	out := strings.Join(lines, "")
	if n := int(*o.LimitBytes); n < len(out) {
		out = out[:n]
	}
	return io.NopCloser(strings.NewReader(out)), nil
}

// TestReadLogKeepsTheNewest: whatever the length of the scheduler's log lines, the
// bundle keeps at most DefaultLogBytes of whole lines ending with the newest one
// (a single line longer than that: a part of it), though the kubelet cuts what it
// sends at limitBytes from the oldest line it sends.
func TestReadLogKeepsTheNewest(t *testing.T) {
	for _, size := range []int{80, 1 << 10, 6 << 10, 64 << 10, 300 << 10} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			var b strings.Builder
			for i := 1; i <= 210; i++ {
				line := fmt.Sprintf("line %d ", i)
				b.WriteString(line + strings.Repeat("é", (size-len(line))/2) + "\n")
			}
			src := &kubeletLog{log: b.String()}
			k := &Keeper{Logs: src, Namespace: "ns", Container: "scheduler"}
			got, err := k.readLog(context.Background(), "pod")
			if err != nil {
				t.Fatal(err)
			}
			last := strings.SplitAfter(b.String(), "line 210 ")[1]
			t.Logf("lines of %d bytes: kept %d bytes, %d line(s), reads with tailLines %v", size, len(got), strings.Count(got, "\n"), src.reads)
			if len(got) == 0 || len(got) > DefaultLogBytes || !utf8.ValidString(got) || !strings.HasSuffix(got, "\n") {
				t.Fatalf("kept %d bytes, valid UTF-8 %v", len(got), utf8.ValidString(got))
			}
			if size <= DefaultLogBytes {
				if !strings.HasPrefix(got, "line ") || !strings.HasSuffix(got, "line 210 "+last) {
					t.Errorf("kept %q … %q, want whole lines up to line 210", got[:min(20, len(got))], got[max(0, len(got)-20):])
				}
			} else if !strings.HasSuffix(last, got) {
				t.Errorf("kept %d bytes that are not the end of the newest line", len(got))
			}
		})
	}
}

// TestKeepEnd: the end of a log, cut where a line starts.
func TestKeepEnd(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int64
		want string
	}{
		{"a\nbb\nccc\n", 100, "a\nbb\nccc\n"},
		{"a\nbb\nccc\n", 7, "bb\nccc\n"}, // cut exactly at a line's start
		{"a\nbb\nccc\n", 6, "ccc\n"},     // cut inside "bb": from the next line
		{"a\nbb\nccc\n", 3, "cc\n"},      // only the newest line's end fits
		{"aé\n", 2, "\n"},                // never half a character
	} {
		if got := string(keepEnd([]byte(c.in), c.n)); got != c.want {
			t.Errorf("keepEnd(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}
