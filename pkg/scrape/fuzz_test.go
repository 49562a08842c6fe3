package scrape

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// FuzzExtract feeds arbitrary pages to Extract. Seeds: the repository's recorded
// scheduler pages (testdata/*.txt at the module root), the table of
// TestExtractVariants, and testdata/fuzz/FuzzExtract (kept interesting inputs).
//
//	go test ./pkg/scrape -run '^$' -fuzz '^FuzzExtract$' -fuzztime 10m -parallel 1
//
// Properties: it never panics; it returns either a *Error with a Kind or a sample
// with all five statuses, each from exactly one series, none negative, and sane
// counters; the result depends only on the bytes, not on how the reader splits
// them; and no more than maxKeptBytes of the page is ever kept for the parser.
func FuzzExtract(f *testing.F) {
	pages, err := filepath.Glob("../../testdata/*.txt")
	if err != nil || len(pages) == 0 {
		f.Fatalf("no recorded pages in ../../testdata: %v", err)
	}
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	histogram := "# TYPE agentenv_scheduler_rpc_duration_seconds histogram\n" +
		"agentenv_scheduler_rpc_duration_seconds_bucket{rpc=\"Heartbeat\",status=\"ok\",le=\"+Inf\"} 7\n" +
		"agentenv_scheduler_rpc_duration_seconds_sum{rpc=\"Heartbeat\",status=\"ok\"} 0.5\n" +
		"agentenv_scheduler_rpc_duration_seconds_count{rpc=\"Heartbeat\",status=\"ok\"} 7\n" +
		"agentenv_scheduler_rpc_duration_seconds_count{rpc=\"Heartbeat\",status=\"invalid_argument\"} 3\n"
	for _, s := range []string{
		"",
		observedBlock,
		indent(observedBlock),
		observedBlock + histogram,
		observedBlock + "agentenv_scheduler_rpc_duration_seconds_count{rpc=\"Heartbeat\",status=\"invalid_argument\"} 42\n",
		observedBlock + "# TYPE agentenv_scheduler_watch_last_event_age_seconds gauge\nagentenv_scheduler_watch_last_event_age_seconds 312.5\n",
		observedBlock[:len(observedBlock)-10],
		strings.Replace(observedBlock, `"ready"} 2`, `"ready"} NaN`, 1),
		strings.Replace(observedBlock, "nodes gauge", "nodes untyped", 1),
		observedBlock + "agentenv_scheduler_observed_nodes{status=\"ready\"} 0\n",
		"# TYPE other gauge\nother{a=\"" + strings.Repeat("x", 300) + "\"} 1\n" + observedBlock,
		"<html><body>login</body></html>\n",
	} {
		f.Add([]byte(s))
	}

	f.Fuzz(func(t *testing.T, page []byte) {
		s, err := Extract(bytes.NewReader(page))
		checkExtracted(t, s, err)

		// Deterministic, and independent of how the body arrives: a reader handing
		// out one byte at a time, or data together with io.EOF, reads the same.
		s2, err2 := Extract(bytes.NewReader(page))
		sameExtraction(t, "second run", s, err, s2, err2)
		if len(page) <= 64<<10 {
			s3, err3 := Extract(iotest.OneByteReader(bytes.NewReader(page)))
			sameExtraction(t, "one byte at a time", s, err, s3, err3)
		}
		s4, err4 := Extract(iotest.DataErrReader(bytes.NewReader(page)))
		sameExtraction(t, "data with EOF", s, err, s4, err4)

		// Memory: what is kept for the parser is bounded, whatever the page.
		kept, ferr := filterFamilies(bytes.NewReader(page))
		if err == nil {
			// Each status the sample reports comes from exactly one series.
			parser := expfmt.NewTextParser(model.UTF8Validation)
			families, perr := parser.TextToMetricFamilies(bytes.NewReader(kept))
			if perr != nil {
				t.Fatalf("a sample from a page whose watched families do not parse: %v", perr)
			}
			series := map[string]int{}
			for _, m := range families[ObservedNodesMetric].GetMetric() {
				series[labelValue(m, "status")]++
			}
			for status, n := range series {
				if n > 1 {
					t.Fatalf("%d series with status=%q, yet a sample (%v)", n, status, s.Observed)
				}
			}
		}
		if ferr == nil && len(kept) > maxKeptBytes {
			t.Fatalf("kept %d bytes of a %d-byte page, more than %d", len(kept), len(page), maxKeptBytes)
		}
		if ferr != nil && KindOf(ferr) == "" {
			t.Fatalf("filterFamilies returned an untyped error %T: %v", ferr, ferr)
		}
	})
}

func checkExtracted(t *testing.T, s Sample, err error) {
	t.Helper()
	if err != nil {
		if KindOf(err) == "" {
			t.Fatalf("error is not a *scrape.Error: %T %v", err, err)
		}
		if !reflect.DeepEqual(s, Sample{}) {
			t.Fatalf("an error came with a non-empty sample %+v", s)
		}
		return
	}
	if s.Observed == nil {
		t.Fatal("no error and no observed map")
	}
	for _, status := range ObservedStatuses {
		n, ok := s.Observed[status]
		if !ok {
			t.Fatalf("status %q missing from %v", status, s.Observed)
		}
		if n < 0 {
			t.Fatalf("status %q is negative: %d", status, n)
		}
	}
	for status, n := range s.Observed {
		if n < 0 {
			t.Fatalf("status %q is negative: %d", status, n)
		}
	}
	if s.HeartbeatOK > 1<<53 || s.HeartbeatRejected > 1<<53 {
		t.Fatalf("counters beyond exact float precision: %d %d", s.HeartbeatOK, s.HeartbeatRejected)
	}
	if s.WatchAge != nil && (math.IsNaN(*s.WatchAge) || math.IsInf(*s.WatchAge, 0) || *s.WatchAge < 0) {
		t.Fatalf("watch age %v is not finite and non-negative", *s.WatchAge)
	}
}

func sameExtraction(t *testing.T, how string, s1 Sample, err1 error, s2 Sample, err2 error) {
	t.Helper()
	if (err1 == nil) != (err2 == nil) || (err1 != nil && err1.Error() != err2.Error()) {
		t.Fatalf("%s: error %v, first run %v", how, err2, err1)
	}
	if !reflect.DeepEqual(s1, s2) {
		t.Fatalf("%s: sample %+v, first run %+v", how, s2, s1)
	}
}
