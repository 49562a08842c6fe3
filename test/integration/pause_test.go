package integration

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentenv/watchdog/internal/testenv"
	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/decide"
)

// annotateScheduler sets (value "") or removes (nil) annotations of the scheduler
// Deployment, as its owners would with kubectl annotate.
func (s *scenario) annotateScheduler(ann map[string]*string) {
	s.t.Helper()
	ctx, cancel := testenv.Ctx()
	defer cancel()
	d, err := env.Client.AppsV1().Deployments(s.ns).Get(ctx, "agentenv-scheduler", metav1.GetOptions{})
	must(s.t, err)
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	for k, v := range ann {
		if v == nil {
			delete(d.Annotations, k)
		} else {
			d.Annotations[k] = *v
		}
	}
	d, err = env.Client.AppsV1().Deployments(s.ns).Update(ctx, d, metav1.UpdateOptions{})
	must(s.t, err)
	// A Deployment's annotations are part of its generation: settle it, as the
	// Deployment controller (not running here) would within a moment.
	_, err = testenv.SettleDeployment(ctx, env.Client, d)
	must(s.t, err)
}

func ptr(s string) *string { return &s }

// TestPauseByAnnotation, on the real API server: the scheduler's owners annotate
// its Deployment with a pause. A restart that comes due is held (blocked, paged as
// "paused: would restart"), nothing is restarted, and the check report, the
// Event, status, history and doctor say so. Once the pause has expired the
// restart is made, with a warning about the stale annotation.
func TestPauseByAnnotation(t *testing.T) {
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-discovery-dead.txt")})
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	s.annotateScheduler(map[string]*string{
		decide.PauseUntilAnnotation:  ptr(until.Format(time.RFC3339)),
		decide.PauseReasonAnnotation: ptr("etcd maintenance CHG-1234"),
	})
	first := s.check()
	first.expect(t, 0, "wedged", "wait")
	if first.report.Paused == nil || !first.report.Paused.Until.Equal(until) {
		t.Errorf("the report must say paused on every run: %+v", first.report.Paused)
	}
	waitPastWedgedFor()
	r := s.check()
	r.expect(t, 0, "wedged", "blocked")
	if !strings.Contains(r.report.Reason, "paused: would restart") || !strings.Contains(r.report.Reason, "etcd maintenance CHG-1234") {
		t.Errorf("reason %q", r.report.Reason)
	}
	if !s.podExists(s.pod.Name) {
		t.Fatal("restarted while paused")
	}
	evs := s.events(s.pod.Name, alert.Spec(alert.EventRestartBlocked).Reason)
	if len(evs) != 1 || !strings.Contains(evs[0].Message, "[paused until "+until.Format(time.RFC3339)) {
		t.Errorf("want one restart-blocked Event that says paused: %+v", evs)
	}
	st, _ := s.state()
	if st.LastRun == nil || !strings.Contains(st.LastRun.Paused, "etcd maintenance CHG-1234") || len(st.Restarts) != 0 {
		t.Fatalf("state: last run %+v, restarts %+v", st.LastRun, st.Restarts)
	}
	base := []string{"--kubeconfig", env.Kubeconfig, "--namespace", s.ns}
	if out := runCLI(t, append([]string{"status"}, base...)...); !strings.Contains(out.stdout, "paused until "+until.Format(time.RFC3339)) {
		t.Errorf("status does not say paused:\n%s", out.stdout)
	}
	if out := runCLI(t, append([]string{"history"}, base...)...); !strings.Contains(out.stdout, "paused until "+until.Format(time.RFC3339)) {
		t.Errorf("history does not say paused:\n%s", out.stdout)
	}
	d := runDoctor(t, restrictedDoctor(t, s, "chart-rights-pause", chartRules())...)
	if c := d.check(t, "restarts not paused"); !c.Warning || !strings.Contains(c.Detail, "etcd maintenance CHG-1234") || !strings.Contains(c.Hint, "annotate deployment agentenv-scheduler "+decide.PauseUntilAnnotation+"-") {
		t.Errorf("doctor: %+v", c)
	}

	// Expired: ignored with a warning, and the restart is made.
	s.annotateScheduler(map[string]*string{decide.PauseUntilAnnotation: ptr(time.Now().Add(-time.Minute).UTC().Format(time.RFC3339))})
	r = s.check()
	r.expect(t, 0, "wedged", "restart")
	if r.report.Paused != nil || !strings.Contains(strings.Join(r.report.Warnings, "\n"), "ignored: expired at") {
		t.Errorf("an expired pause must be ignored with a warning: paused %+v, warnings %q", r.report.Paused, r.report.Warnings)
	}
	if s.podExists(s.pod.Name) {
		t.Error("the wedged pod still exists after the pause expired")
	}
}

// A malformed pause (no expiry) is ignored with a warning: the restart is made.
func TestMalformedPauseIsIgnored(t *testing.T) {
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-discovery-dead.txt")})
	s.annotateScheduler(map[string]*string{decide.PauseReasonAnnotation: ptr("forever")})
	s.check().expect(t, 0, "wedged", "wait")
	waitPastWedgedFor()
	r := s.check()
	r.expect(t, 0, "wedged", "restart")
	if !strings.Contains(strings.Join(r.report.Warnings, "\n"), "no "+decide.PauseUntilAnnotation) {
		t.Errorf("warnings %q", r.report.Warnings)
	}
	// Told once, on the state ConfigMap's Events, not only in the log.
	if evs := s.events("agentenv-scheduler-watchdog", alert.Spec(alert.EventPauseInvalid).Reason); len(evs) != 1 || !strings.HasPrefix(evs[0].Message, "[pause-invalid]") {
		t.Errorf("want one pause-invalid Event over two runs: %+v", evs)
	}
}
