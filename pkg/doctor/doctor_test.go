package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/agentenv/watchdog/pkg/kube"
	"github.com/agentenv/watchdog/pkg/observe"
)

func TestSkew(t *testing.T) {
	base := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name          string
		before, after time.Time
		date          time.Time
		want          time.Duration
	}{
		{"same second", base.Add(200 * time.Millisecond), base.Add(300 * time.Millisecond), base, 0},
		// The Date header truncates: a server at 12:00:00.9 says 12:00:00.
		{"truncated, ours just after", base.Add(900 * time.Millisecond), base.Add(999 * time.Millisecond), base, 0},
		{"server ahead", base, base.Add(100 * time.Millisecond), base.Add(10 * time.Second), 10*time.Second - 100*time.Millisecond},
		{"server behind", base.Add(10 * time.Second), base.Add(10*time.Second + 100*time.Millisecond), base, -9 * time.Second},
	} {
		if got := Skew(c.before, c.after, c.date); got != c.want {
			t.Errorf("%s: skew %s, want %s", c.name, got, c.want)
		}
	}
}

// fakeAPI answers /version with a Date header of its own clock, now plus offset.
func fakeAPI(t *testing.T, offset time.Duration, date string) *kube.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/version" {
			http.NotFound(w, r)
			return
		}
		d := date
		if d == "" {
			d = time.Now().Add(offset).UTC().Format(http.TimeFormat)
		}
		w.Header()["Date"] = []string{d}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"major":"1","minor":"37","gitVersion":"v1.37.2"}`)
	}))
	t.Cleanup(srv.Close)
	c, err := kube.New(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func apiResults(t *testing.T, c *kube.Client) []Result {
	t.Helper()
	d := &Doctor{Observer: &observe.Observer{Client: c, APIServer: "fake", Clock: clock.RealClock{}}}
	if !d.checkAPI(context.Background()) {
		t.Fatalf("API not reachable: %+v", d.results)
	}
	return d.results
}

func TestClockAgrees(t *testing.T) {
	res := apiResults(t, fakeAPI(t, 0, ""))
	if len(res) != 2 || !res[0].OK || !strings.Contains(res[0].Detail, "v1.37.2") || !res[1].OK || res[1].Skipped {
		t.Fatalf("results %+v", res)
	}
}

func TestClockSkewFails(t *testing.T) {
	for _, offset := range []time.Duration{-ClockTolerance - 3*time.Second, ClockTolerance + 3*time.Second} {
		res := apiResults(t, fakeAPI(t, offset, ""))
		clock := res[1]
		if clock.OK || clock.Hint == "" || !strings.Contains(clock.Detail, "tolerance 5s") {
			t.Errorf("server off by %s: %+v", offset, clock)
		}
	}
	// Just inside the tolerance passes (the second of truncation included).
	if res := apiResults(t, fakeAPI(t, ClockTolerance-1500*time.Millisecond, "")); !res[1].OK {
		t.Errorf("server off by less than the tolerance: %+v", res[1])
	}
}

func TestClockWithoutDateFails(t *testing.T) {
	res := apiResults(t, fakeAPI(t, 0, "not a date"))
	if !res[0].OK || res[1].OK || !strings.Contains(res[1].Detail, "Date header") {
		t.Fatalf("results %+v", res)
	}
}

func TestAPIUnreachableSkipsTheRest(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close() // nothing listens there any more
	c, err := kube.New(&rest.Config{Host: srv.URL, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	d := &Doctor{Observer: &observe.Observer{Client: c, APIServer: srv.URL, Clock: clock.RealClock{}}}
	res := d.Run(context.Background())
	if res[0].OK || res[0].Hint == "" {
		t.Fatalf("unreachable API server passed: %+v", res[0])
	}
	rep := NewReport("wd", srv.URL, res)
	if rep.OK || rep.Failed != 1 {
		t.Errorf("report ok %t failed %d, want one failure and the rest skipped: %+v", rep.OK, rep.Failed, res)
	}
	for _, r := range res[1:] {
		if !r.Skipped && r.Group != GroupAlerts {
			t.Errorf("%s/%s ran without an API server: %+v", r.Group, r.Name, r)
		}
	}
}

func TestReportFormats(t *testing.T) {
	results := []Result{
		{Group: GroupAPI, Name: "API server is reachable", OK: true, Detail: "Kubernetes v1.37.2"},
		{Group: GroupRBAC, Name: "can delete pods", Detail: "denied", Hint: "grant it"},
		{Group: GroupObjects, Name: "scheduler leader Lease exists", OK: true, Skipped: true, Detail: "--leader-lease is not set"},
	}
	rep := NewReport("wd", "https://api", results)
	if rep.OK || rep.Failed != 1 || rep.Skipped != 1 {
		t.Fatalf("report %+v", rep)
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"✓ API server is reachable: Kubernetes v1.37.2\n",
		"✗ can delete pods: denied\n    fix: grant it\n",
		"- scheduler leader Lease exists (skipped): --leader-lease is not set\n",
		"✗ 1 of 2 checks failed (1 skipped)\n",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
	var js bytes.Buffer
	if err := json.NewEncoder(&js).Encode(rep); err != nil {
		t.Fatal(err)
	}
	var back struct {
		OK     bool `json:"ok"`
		Checks []struct {
			Name    string `json:"name"`
			OK      bool   `json:"ok"`
			Skipped bool   `json:"skipped"`
			Detail  string `json:"detail"`
			Hint    string `json:"hint"`
		} `json:"checks"`
	}
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.OK || len(back.Checks) != 3 || back.Checks[1].OK || back.Checks[1].Hint != "grant it" || !back.Checks[2].Skipped {
		t.Errorf("JSON report %s", js.String())
	}

	ok := NewReport("wd", "https://api", results[:1])
	text.Reset()
	_ = ok.WriteText(&text)
	if !ok.OK || !strings.Contains(text.String(), "✓ all 1 checks passed (0 skipped)") {
		t.Errorf("all-passed report ok %t:\n%s", ok.OK, text.String())
	}
}

// A warning passes (exit 0) but shows its doubt and what to do, and is counted.
func TestReportWarning(t *testing.T) {
	rep := NewReport("wd", "https://api", []Result{
		{Group: GroupAPI, Name: "API server is reachable", OK: true, Detail: "Kubernetes v1.37.2"},
		{Group: GroupScheduler, Name: "scheduler pods a run judges", OK: true, Warning: true, Detail: "2 pods are judged", Hint: "set --leader-lease"},
	})
	if !rep.OK || rep.Warnings != 1 || rep.Failed != 0 {
		t.Fatalf("report %+v", rep)
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"! scheduler pods a run judges: 2 pods are judged\n    fix: set --leader-lease\n",
		"! all 2 checks passed, 1 with a warning (0 skipped)\n",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
	var js bytes.Buffer
	if err := json.NewEncoder(&js).Encode(rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js.String(), `"warnings":1`) || !strings.Contains(js.String(), `"warning":true`) {
		t.Errorf("JSON report %s", js.String())
	}
}
