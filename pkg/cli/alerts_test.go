package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
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
		{&check.Error{Step: check.StepObserve, Err: fmt.Errorf("%s", secretish)}, "/ping/abc/fail failed: observe"},
		{fmt.Errorf("API server https://10.96.0.1:443: %w", &check.Error{Step: check.StepWriteState, Err: fmt.Errorf("update state ConfigMap tenant-prod-eu/x: %s", secretish)}), "/ping/abc/fail failed: write-state"},
		{&check.Error{Step: check.StepReadState, Err: fmt.Errorf("%s", secretish)}, "/ping/abc/fail failed: read-state"},
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

// TestUnsignedWebhookWarnsEveryRun: a webhook without --webhook-secret is accepted
// (0.1.0 installs keep working) and every run's report warns that it is unsigned.
func TestUnsignedWebhookWarnsEveryRun(t *testing.T) {
	for _, o := range []AlertOptions{{WebhookURL: "https://h.example.com/x"}, {WebhookURL: "https://h.example.com/x", WebhookSecret: strings.Repeat("k", 32)}, {}} {
		rep := &check.Report{}
		p := &wired{Runner: &check.Runner{Log: zerolog.Nop()}, f: &checkFlags{alerts: o}}
		p.warnUnsigned(rep)
		if unsigned := o.WebhookURL != "" && o.WebhookSecret == ""; unsigned != (len(rep.Warnings) == 1 && strings.Contains(rep.Warnings[0], "unsigned")) {
			t.Errorf("webhook %q, secret set %v: warnings %q", o.WebhookURL, o.WebhookSecret != "", rep.Warnings)
		}
	}
}
