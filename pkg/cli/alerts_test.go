package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentenv/watchdog/pkg/check"
)

// TestFailPingCarriesOnlyACategory: the dead man's switch is a third party; the
// /fail ping says what kind of step failed, never the error text (namespace,
// selector, API server address).
func TestFailPingCarriesOnlyACategory(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.URL.Path+" "+string(b))
		mu.Unlock()
	}))
	defer srv.Close()
	o := &AlertOptions{HeartbeatURL: srv.URL + "/ping/abc", AlertTimeout: 2 * time.Second}
	secretish := "list scheduler pods (app.kubernetes.io/name=agentenv-scheduler) in tenant-prod-eu: Get \"https://10.96.0.1:443/api/v1/namespaces/tenant-prod-eu/pods\": dial tcp 10.96.0.1:443: connect: connection refused"

	for _, tc := range []struct {
		err  error
		want string
	}{
		{&check.Error{What: "observe", Err: fmt.Errorf("%s", secretish)}, "/ping/abc/fail failed: observe"},
		{fmt.Errorf("API server https://10.96.0.1:443: %w", &check.Error{What: "write state", Err: fmt.Errorf("update state ConfigMap tenant-prod-eu/x: %s", secretish)}), "/ping/abc/fail failed: write-state"},
		{&check.Error{What: "read state", Err: fmt.Errorf("%s", secretish)}, "/ping/abc/fail failed: read-state"},
		{fmt.Errorf("something new in tenant-prod-eu at 10.96.0.1"), "/ping/abc/fail failed: other"},
		{nil, "/ping/abc ok"},
	} {
		mu.Lock()
		got = nil
		mu.Unlock()
		pingHeartbeat(context.Background(), o, tc.err, false, zerolog.Nop())
		mu.Lock()
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("error %v: pinged %q, want %q", tc.err, got, tc.want)
		}
		for _, leak := range []string{"tenant-prod-eu", "10.96.0.1", "agentenv-scheduler"} {
			if len(got) == 1 && strings.Contains(got[0], leak) {
				t.Errorf("the ping carries %q: %q", leak, got[0])
			}
		}
		mu.Unlock()
	}
}

// TestEveryFailureHasACategory: each step pkg/check can fail at (Error.What) maps
// to a category, so that a new one is not silently reported as "other".
func TestEveryFailureHasACategory(t *testing.T) {
	files, err := filepath.Glob("../check/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no pkg/check sources: %v", err)
	}
	what := regexp.MustCompile(`Error\{What: "([^"]+)"`)
	seen := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range what.FindAllStringSubmatch(string(b), -1) {
			seen++
			if _, ok := failureCategories[m[1]]; !ok {
				t.Errorf("%s: check.Error{What: %q} has no heartbeat category", filepath.Base(f), m[1])
			}
		}
	}
	if seen < 5 {
		t.Fatalf("found only %d check.Error sites: the pattern no longer matches pkg/check", seen)
	}
}
