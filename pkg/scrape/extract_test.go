package scrape

import (
	"os"
	"strings"
	"testing"
)

func readFixture(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile("../../testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestExtractFixtures(t *testing.T) {
	healthy, err := Extract(strings.NewReader(readFixture(t, "scheduler-metrics-healthy.txt")))
	if err != nil {
		t.Fatalf("healthy page: %v", err)
	}
	if healthy.Ready() != 3 || healthy.Observed["unhealthy"] != 0 {
		t.Errorf("healthy: ready=%d unhealthy=%d, want 3 and 0", healthy.Ready(), healthy.Observed["unhealthy"])
	}
	if healthy.HeartbeatOK != 2160 {
		t.Errorf("healthy: heartbeat ok=%d, want 2160", healthy.HeartbeatOK)
	}
	if healthy.HeartbeatRejected != 0 {
		t.Errorf("healthy: absent invalid_argument series must read 0, got %d", healthy.HeartbeatRejected)
	}
	if healthy.WatchAge != nil {
		t.Errorf("healthy: watch age should be absent, got %v", *healthy.WatchAge)
	}

	dead, err := Extract(strings.NewReader(readFixture(t, "scheduler-metrics-discovery-dead.txt")))
	if err != nil {
		t.Fatalf("dead page: %v", err)
	}
	if dead.Ready() != 0 || dead.HeartbeatRejected != 11 {
		t.Errorf("dead: ready=%d rejected=%d, want 0 and 11", dead.Ready(), dead.HeartbeatRejected)
	}
}

const observedBlock = `# HELP agentenv_scheduler_observed_nodes Observed node count by derived status.
# TYPE agentenv_scheduler_observed_nodes gauge
agentenv_scheduler_observed_nodes{status="connecting"} 0
agentenv_scheduler_observed_nodes{status="lingering"} 0
agentenv_scheduler_observed_nodes{status="ready"} 2
agentenv_scheduler_observed_nodes{status="unhealthy"} 1
agentenv_scheduler_observed_nodes{status="unspecified"} 0
`

func TestExtractVariants(t *testing.T) {
	cases := []struct {
		name     string
		page     string
		wantKind Kind
		check    func(t *testing.T, s Sample)
	}{
		{name: "minimal", page: observedBlock, check: func(t *testing.T, s Sample) {
			if s.Ready() != 2 || s.Observed["unhealthy"] != 1 {
				t.Errorf("ready=%d unhealthy=%d", s.Ready(), s.Observed["unhealthy"])
			}
		}},
		{name: "untyped count series", page: observedBlock +
			"agentenv_scheduler_rpc_duration_seconds_count{rpc=\"Heartbeat\",status=\"invalid_argument\"} 42\n",
			check: func(t *testing.T, s Sample) {
				if s.HeartbeatRejected != 42 {
					t.Errorf("rejected=%d, want 42", s.HeartbeatRejected)
				}
			}},
		{name: "watch age present", page: observedBlock + "# TYPE agentenv_scheduler_watch_last_event_age_seconds gauge\nagentenv_scheduler_watch_last_event_age_seconds 312.5\n",
			check: func(t *testing.T, s Sample) {
				if s.WatchAge == nil || *s.WatchAge != 312.5 {
					t.Errorf("watch age = %v", s.WatchAge)
				}
			}},
		{name: "leading blanks and other families ignored", page: "# TYPE other gauge\nother 1\n" + indent(observedBlock), check: func(t *testing.T, s Sample) {
			if s.Ready() != 2 {
				t.Errorf("ready=%d", s.Ready())
			}
		}},
		{name: "empty page", page: "", wantKind: KindAbsent},
		{name: "html page", page: "<html><body>login</body></html>\n", wantKind: KindAbsent},
		{name: "query-only scheduler", page: "# TYPE agentenv_scheduler_schedule_assignments_total counter\nagentenv_scheduler_schedule_assignments_total 4\n", wantKind: KindAbsent},
		{name: "truncated mid-line", page: observedBlock[:len(observedBlock)-10], wantKind: KindTruncated},
		{name: "truncated at line boundary, status missing", page: strings.Join(strings.SplitAfter(observedBlock, "\n")[:5], ""), wantKind: KindInvalid},
		{name: "NaN ready", page: strings.Replace(observedBlock, `"ready"} 2`, `"ready"} NaN`, 1), wantKind: KindInvalid},
		{name: "negative ready", page: strings.Replace(observedBlock, `"ready"} 2`, `"ready"} -1`, 1), wantKind: KindInvalid},
		{name: "fractional ready", page: strings.Replace(observedBlock, `"ready"} 2`, `"ready"} 1.5`, 1), wantKind: KindInvalid},
		{name: "Inf ready", page: strings.Replace(observedBlock, `"ready"} 2`, `"ready"} +Inf`, 1), wantKind: KindInvalid},
		{name: "duplicate series", page: observedBlock + "agentenv_scheduler_observed_nodes{status=\"ready\"} 0\n", wantKind: KindInvalid},
		{name: "duplicate series with labels reordered", page: observedBlock + "# TYPE agentenv_scheduler_rpc_duration_seconds histogram\n" +
			"agentenv_scheduler_rpc_duration_seconds_count{rpc=\"Heartbeat\",status=\"ok\"} 1\n" +
			"agentenv_scheduler_rpc_duration_seconds_count{status=\"ok\",rpc=\"Heartbeat\"} 2\n", wantKind: KindInvalid},
		{name: "NaN rejected counter in histogram", page: observedBlock + "# TYPE agentenv_scheduler_rpc_duration_seconds histogram\n" +
			"agentenv_scheduler_rpc_duration_seconds_count{rpc=\"Heartbeat\",status=\"invalid_argument\"} NaN\n", wantKind: KindInvalid},
		{name: "fractional untyped rejected count", page: observedBlock +
			"agentenv_scheduler_rpc_duration_seconds_count{rpc=\"Heartbeat\",status=\"invalid_argument\"} 3.5\n",
			wantKind: KindInvalid},
		{name: "fractional counter rejected count", page: observedBlock +
			"# TYPE agentenv_scheduler_rpc_duration_seconds_count counter\n" +
			"agentenv_scheduler_rpc_duration_seconds_count{rpc=\"Heartbeat\",status=\"invalid_argument\"} 3.5\n",
			wantKind: KindInvalid},
		{name: "garbage inside the family", page: observedBlock + "agentenv_scheduler_observed_nodes{status=\"ready\" 3\n", wantKind: KindParse},
		{name: "wrong type", page: strings.Replace(observedBlock, "nodes gauge", "nodes counter", 1), wantKind: KindInvalid},
	}
	// The optional gauge: a value that cannot be trusted drops the gauge alone,
	// with a warning; the required families still decide the sample.
	for _, bad := range []string{"NaN", "+Inf", "-Inf", "-3",
		"1\nagentenv_scheduler_watch_last_event_age_seconds{shard=\"b\"} 2"} {
		cases = append(cases, struct {
			name     string
			page     string
			wantKind Kind
			check    func(t *testing.T, s Sample)
		}{name: "watch age " + bad + " dropped", page: observedBlock + "agentenv_scheduler_watch_last_event_age_seconds " + bad + "\n",
			check: func(t *testing.T, s Sample) {
				if s.WatchAge != nil || len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], WatchAgeMetric+" ignored") {
					t.Errorf("watch age %v, warnings %q: want the gauge dropped with one warning", s.WatchAge, s.Warnings)
				}
				if s.Ready() != 2 {
					t.Errorf("the required families must still be read: ready=%d", s.Ready())
				}
			}})
	}
	cases = append(cases, struct {
		name     string
		page     string
		wantKind Kind
		check    func(t *testing.T, s Sample)
	}{name: "watch age of years kept", page: observedBlock + "agentenv_scheduler_watch_last_event_age_seconds 1.7e+12\n",
		check: func(t *testing.T, s Sample) {
			if s.WatchAge == nil || *s.WatchAge != 1.7e12 || len(s.Warnings) != 0 {
				t.Errorf("a huge but finite age is a fact, not a doubt: %v %q", s.WatchAge, s.Warnings)
			}
		}})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Extract(strings.NewReader(tc.page))
			if tc.wantKind != "" {
				if KindOf(err) != tc.wantKind {
					t.Fatalf("want a %s error, got %v (sample %+v)", tc.wantKind, err, s)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			tc.check(t, s)
		})
	}
}

func TestExtractSkipsHugeForeignLines(t *testing.T) {
	long := "other_metric{label=\"" + strings.Repeat("x", 200<<10) + "\"} 1\n"
	s, err := Extract(strings.NewReader(long + observedBlock + long))
	if err != nil {
		t.Fatalf("a long line of another family must be skipped: %v", err)
	}
	if s.Ready() != 2 {
		t.Errorf("ready=%d", s.Ready())
	}
}

func TestExtractRejectsTooManyWatchedSeries(t *testing.T) {
	var b strings.Builder
	b.WriteString(observedBlock)
	for i := 0; b.Len() < maxKeptBytes+1024; i++ {
		b.WriteString("agentenv_scheduler_rpc_duration_seconds_count{rpc=\"X\",status=\"s")
		b.WriteString(strings.Repeat("y", 40))
		b.WriteString(string(rune('a' + i%26)))
		b.WriteString(strings.Repeat("z", i/26%1000))
		b.WriteString("\"} 1\n")
	}
	_, err := Extract(strings.NewReader(b.String()))
	if KindOf(err) != KindInvalid || !strings.Contains(err.Error(), "too many series") {
		t.Fatalf("want invalid for an oversized watched family, got %v", err)
	}
}

func indent(page string) string {
	lines := strings.SplitAfter(page, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = "  " + l
		}
	}
	return strings.Join(lines, "")
}
