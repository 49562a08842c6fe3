package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestDoctorUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"doctor", "--scheduler-selector", "a in (("},            // check's own validation
		{"doctor", "--restart-method", "reboot"},                 // ditto
		{"doctor", "--send-test"},                                // nothing to send to
		{"doctor", "--leader-elect", "--leader-elect-lease", ""}, // election without a Lease
		{"doctor", "--output", "yaml"},                           // output options
		{"doctor", "extra-argument"},                             // no arguments
	} {
		var stdout, stderr bytes.Buffer
		if code := ExecuteContext(context.Background(), args, &stdout, &stderr); code != ExitUsage {
			t.Errorf("%q: exit %d, want %d\n%s", args, code, ExitUsage, stderr.String())
		}
	}
}

// An unreachable API server is a failed check (exit 1) with a JSON report on stdout.
func TestDoctorUnreachableExitsOne(t *testing.T) {
	srv := httptest.NewServer(nil)
	srv.Close()
	kubeconfig := writeKubeconfig(t, srv.URL)
	var stdout, stderr bytes.Buffer
	code := ExecuteContext(context.Background(), []string{"doctor", "--kubeconfig", kubeconfig, "-o", "json", "--api-timeout", "2s"}, &stdout, &stderr)
	if code != ExitFailed {
		t.Fatalf("exit %d, want %d\n%s", code, ExitFailed, stderr.String())
	}
	var rep struct {
		OK     bool `json:"ok"`
		Failed int  `json:"failed"`
		Checks []struct {
			Name string `json:"name"`
			OK   bool   `json:"ok"`
			Hint string `json:"hint"`
		} `json:"checks"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("stdout is not one JSON report: %v\n%s", err, stdout.String())
	}
	if rep.OK || rep.Failed != 1 || rep.Checks[0].OK || rep.Checks[0].Hint == "" {
		t.Errorf("report %+v", rep)
	}
	if !strings.Contains(stderr.String(), "1 check(s) failed") {
		t.Errorf("stderr %q", stderr.String())
	}
}
