package integration

import (
	"strings"
	"testing"
)

// TestHoldFailsOpenWhenAlertmanagerIsDown: the restart goes ahead, with a warning.
func TestHoldFailsOpenWhenAlertmanagerIsDown(t *testing.T) {
	am := startAlertmanager(t)
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-discovery-dead.txt")})
	flags := []string{"--alertmanager-url", am.Base, "--hold-restarts-on-alert", `alertname=~"etcd.*"`, "--alert-timeout", "1s"}
	s.check(flags...).expect(t, 0, "wedged", "wait")
	am.Stop()
	waitPastWedgedFor()
	r := s.check(flags...)
	if r.report.Action != "restart" || s.podExists(s.pod.Name) {
		t.Fatalf("Alertmanager down must not hold the restart: %s %s", r.report.Action, r.report.Reason)
	}
	if w := strings.Join(r.report.Warnings, "\n"); !strings.Contains(w, "the hold fails open") {
		t.Errorf("warnings %q", r.report.Warnings)
	}
}
