package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/deliver"
)

// fire posts an alert to a real Alertmanager as Prometheus would, ending at ends
// (in the past: resolved).
func fire(t *testing.T, am *alertmanagerProc, labels map[string]string, ends time.Time) {
	t.Helper()
	body, err := json.Marshal([]deliver.PostableAlert{{Labels: labels, StartsAt: time.Now().Add(-time.Minute), EndsAt: ends}})
	must(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, am.Base+"/api/v2/alerts", bytes.NewReader(body))
	must(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("post alert: %s", resp.Status)
	}
}

// TestRestartsHeldWhileAlertsFire, with a real Alertmanager and the real API
// server: while etcdNoLeader fires, the restart that comes due is blocked, names
// the alert, pages restart-blocked (in the same Alertmanager), and the pod stays;
// once the alert is resolved the restart is made.
func TestRestartsHeldWhileAlertsFire(t *testing.T) {
	am := startAlertmanager(t)
	etcd := map[string]string{"alertname": "etcdNoLeader", "instance": "etcd-0", "severity": "critical"}
	fire(t, am, etcd, time.Now().Add(time.Hour))
	fire(t, am, map[string]string{"alertname": "KubeletDown", "severity": "critical"}, time.Now().Add(time.Hour)) // not matched
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-discovery-dead.txt")})
	flags := []string{"--alertmanager-url", am.Base, "--alertmanager-bearer-token", amToken,
		"--hold-restarts-on-alert", `alertname=~"etcd.*|KubeAPIErrorBudgetBurn"`, "--hold-restarts-on-alert", `{alertname="APIServerDown"}`}
	s.check(flags...).expect(t, 0, "wedged", "wait")
	waitPastWedgedFor()
	r := s.check(flags...)
	r.expect(t, 0, "wedged", "blocked")
	if !strings.Contains(r.report.Reason, `held while alerts fire: etcdNoLeader{instance="etcd-0",severity="critical"}`) || strings.Contains(r.report.Reason, "KubeletDown") {
		t.Errorf("reason %q", r.report.Reason)
	}
	if !s.podExists(s.pod.Name) {
		t.Fatal("restarted while etcd alerts fire")
	}
	blocked := false
	for _, a := range am.active(t, s.ns) {
		blocked = blocked || a.Labels["alertname"] == alert.AlertnameOf(alert.EventRestartBlocked)
	}
	if !blocked {
		t.Errorf("the held restart must page restart-blocked: Alertmanager holds %v", alertNames(am.active(t, s.ns)))
	}

	// Resolved: the next run restarts.
	fire(t, am, etcd, time.Now().Add(-time.Second))
	r = s.check(flags...)
	r.expect(t, 0, "wedged", "restart")
	if s.podExists(s.pod.Name) {
		t.Error("the wedged pod still exists after the alerts cleared")
	}
}

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
