package integration

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentenv/watchdog/internal/testenv"
	"github.com/agentenv/watchdog/pkg/restart"
)

func sentAlert(r result, event string) bool {
	for _, a := range r.report.Alerts {
		if a.Event == event && a.OK {
			return true
		}
	}
	return false
}

func TestLeaderOnlyJudging(t *testing.T) {
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-healthy.txt")})
	ctx, cancel := testenv.Ctx()
	defer cancel()
	standby, err := testenv.CreateSchedulerPod(ctx, env.Client, s.ns, testenv.PodSpec{Name: "agentenv-scheduler-standby"})
	must(t, err)
	holder := s.pod.Name + "_5c0ffee"
	_, err = env.Client.CoordinationV1().Leases(s.ns).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "agentenv-scheduler", Namespace: s.ns},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder},
	}, metav1.CreateOptions{})
	must(t, err)

	before := s.metrics.Hits()
	r := s.check("--leader-lease", "agentenv-scheduler")
	r.expect(t, 0, "healthy", "none")
	if got := s.metrics.Hits() - before; got != 1 {
		t.Errorf("scraped %d times; only the leader should be", got)
	}
	if len(r.report.Targets) != 1 || r.report.Targets[0].Pod != s.pod.Name {
		t.Errorf("targets must be the judged pods only: %+v", r.report.Targets)
	}
	if len(r.report.NotJudged) != 1 || r.report.NotJudged[0].Pod != standby.Name || !strings.Contains(r.report.NotJudged[0].Reason, "standby") {
		t.Errorf("the standby must be listed as not judged: %+v", r.report.NotJudged)
	}

	// Without the lease, both pods are judged; wedged standbys (they read 0 by
	// design) would be restarted, so restarts are blocked instead.
	s.metrics.SetPage(fixture(t, "scheduler-metrics-discovery-dead.txt"))
	s.check().expect(t, 0, "wedged", "wait")
	waitPastWedgedFor()
	blocked := s.check()
	blocked.expect(t, 0, "wedged", "blocked")
	if !strings.Contains(blocked.report.Reason, "no --leader-lease") {
		t.Errorf("reason %q", blocked.report.Reason)
	}
	if !s.podExists(s.pod.Name) || !s.podExists(standby.Name) {
		t.Fatal("a pod was restarted although the leader is unknown")
	}
}

// TestExpiredLeaderLeaseJudgesNobody: a Lease whose holder stopped renewing names
// no leader; the watchdog judges and scrapes nobody (unknown) until it is renewed.
// The API server cannot date a write an hour back, so the Lease as it would read
// after an hour without renewal (its renewTime and the managedFields time of that
// write an hour old) is answered by the proxy in front of it.
func TestExpiredLeaderLeaseJudgesNobody(t *testing.T) {
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-discovery-dead.txt")})
	proxy := s.proxied(t)
	ctx, cancel := testenv.Ctx()
	defer cancel()
	holder, seconds := s.pod.Name+"_5c0ffee", int32(15)
	renewed := metav1.NewMicroTime(time.Now().Add(-time.Hour))
	lease, err := env.Client.CoordinationV1().Leases(s.ns).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "agentenv-scheduler", Namespace: s.ns},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &seconds, RenewTime: &renewed},
	}, metav1.CreateOptions{})
	must(t, err)
	stale := lease.DeepCopy()
	stale.APIVersion, stale.Kind = "coordination.k8s.io/v1", "Lease"
	for i := range stale.ManagedFields {
		stale.ManagedFields[i].Time = &metav1.Time{Time: renewed.Time}
	}
	body, err := json.Marshal(stale)
	must(t, err)
	proxy.SetFault(func(r *http.Request) *testenv.Fault {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/leases/agentenv-scheduler") {
			return &testenv.Fault{Body: body}
		}
		return nil
	})

	before := s.metrics.Hits()
	r := s.check("--leader-lease", "agentenv-scheduler")
	r.expect(t, 0, "unknown", "none")
	if !strings.Contains(r.report.Reason, "expired") || !strings.Contains(r.report.Reason, "no current leader") {
		t.Errorf("reason %q does not say the Lease expired", r.report.Reason)
	}
	if got := s.metrics.Hits() - before; got != 0 {
		t.Errorf("scraped %d times with no current leader", got)
	}
	if len(r.report.NotJudged) != 1 || !strings.Contains(r.report.NotJudged[0].Reason, "expired") {
		t.Errorf("the pod must be listed as not judged because the Lease expired: %+v", r.report.NotJudged)
	}

	// Renewed: the holder is judged again (its page reads 0 ready: wedged).
	proxy.SetFault(nil)
	lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	_, err = env.Client.CoordinationV1().Leases(s.ns).Update(ctx, lease, metav1.UpdateOptions{})
	must(t, err)
	s.check("--leader-lease", "agentenv-scheduler").expect(t, 0, "wedged", "wait")
	if !s.podExists(s.pod.Name) {
		t.Fatal("pod deleted")
	}
}

func TestRolloutGateBlocks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(ns string)
		reason string
	}{
		{"mid-rollout", func(ns string) {
			ctx, cancel := testenv.Ctx()
			defer cancel()
			d, err := env.Client.AppsV1().Deployments(ns).Get(ctx, "agentenv-scheduler", metav1.GetOptions{})
			must(t, err)
			d.Status.UpdatedReplicas = 0
			_, err = env.Client.AppsV1().Deployments(ns).UpdateStatus(ctx, d, metav1.UpdateOptions{})
			must(t, err)
		}, "mid-rollout"},
		{"generation not observed", func(ns string) {
			ctx, cancel := testenv.Ctx()
			defer cancel()
			d, err := env.Client.AppsV1().Deployments(ns).Get(ctx, "agentenv-scheduler", metav1.GetOptions{})
			must(t, err)
			d.Spec.Template.Labels["rev"] = "2"
			_, err = env.Client.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{})
			must(t, err)
		}, "not yet observed"},
		{"paused", func(ns string) {
			ctx, cancel := testenv.Ctx()
			defer cancel()
			d, err := env.Client.AppsV1().Deployments(ns).Get(ctx, "agentenv-scheduler", metav1.GetOptions{})
			must(t, err)
			d.Spec.Paused = true
			d, err = env.Client.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{})
			must(t, err)
			_, err = testenv.SettleDeployment(ctx, env.Client, d)
			must(t, err)
		}, "paused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-discovery-dead.txt")})
			tc.mutate(s.ns)
			s.check().expect(t, 0, "wedged", "wait")
			waitPastWedgedFor()
			r := s.check()
			r.expect(t, 0, "wedged", "blocked")
			if !strings.Contains(r.report.Reason, tc.reason) {
				t.Errorf("reason %q lacks %q", r.report.Reason, tc.reason)
			}
			if !s.podExists(s.pod.Name) {
				t.Fatal("restarted during a rollout")
			}
		})
	}
}

func TestRolloutRestartMethod(t *testing.T) {
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-discovery-dead.txt")})
	s.check("--restart-method", "rollout").expect(t, 0, "wedged", "wait")
	waitPastWedgedFor()
	r := s.check("--restart-method", "rollout")
	r.expect(t, 0, "wedged", "restart")
	ctx, cancel := testenv.Ctx()
	defer cancel()
	d, err := env.Client.AppsV1().Deployments(s.ns).Get(ctx, "agentenv-scheduler", metav1.GetOptions{})
	must(t, err)
	at, ok := d.Spec.Template.Annotations[restart.RestartedAtAnnotation]
	if !ok {
		t.Fatalf("no %s annotation on the pod template: %v", restart.RestartedAtAnnotation, d.Spec.Template.Annotations)
	}
	if _, err := time.Parse(time.RFC3339, at); err != nil {
		t.Errorf("annotation %q is not RFC 3339: %v", at, err)
	}
	if !s.podExists(s.pod.Name) {
		t.Error("the rollout method must leave pod replacement to the Deployment controller")
	}
	// The Deployment controller would now roll; until the old pod goes, the same
	// wedge must not be restarted again, and that is no blocked restart to page.
	_, err = testenv.SettleDeployment(ctx, env.Client, d)
	must(t, err)
	again := s.check("--restart-method", "rollout")
	again.expect(t, 0, "wedged", "blocked")
	if !strings.Contains(again.report.Reason, "restart already in progress") || sentAlert(again, "restart-blocked") {
		t.Errorf("reason %q, alerts %+v", again.report.Reason, again.report.Alerts)
	}
}

func TestWatchAgeIsStrongEvidence(t *testing.T) {
	age := 900.0
	page := testenv.Page(testenv.Values{Ready: 0, Unhealthy: 3, HeartbeatOK: 100, WatchAge: &age})
	s := newScenario(t, layout{serving: 3, page: page})
	flags := []string{"--wedged-for", "1h", "--confirm-window", "1s", "--sample-interval", "200ms"}

	// Off by default: the same page is weak evidence, waiting for --wedged-for.
	off := s.check(flags...)
	off.expect(t, 0, "wedged", "wait")
	if off.report.Targets[0].Evidence != "weak" {
		t.Errorf("evidence %q without --max-watch-age", off.report.Targets[0].Evidence)
	}
	on := s.check(append(flags, "--max-watch-age", "5m")...)
	on.expect(t, 0, "wedged", "restart")
	if on.report.Targets[0].Evidence != "strong" || !strings.Contains(on.report.Reason, "no event for 15m") {
		t.Errorf("evidence %q, reason %q", on.report.Targets[0].Evidence, on.report.Reason)
	}
}

// A Lease holder whose clock lags writes renewTime minutes in the past at each
// renewal: the API server's time of that write says it is
// renewing, so it still names the leader, which is judged.
func TestLaggingLeaseHolderIsStillTheLeader(t *testing.T) {
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-discovery-dead.txt")})
	ctx, cancel := testenv.Ctx()
	defer cancel()
	holder, seconds := s.pod.Name, int32(15)
	lagging := func() *metav1.MicroTime { return &metav1.MicroTime{Time: time.Now().Add(-5 * time.Minute)} }
	lease, err := env.Client.CoordinationV1().Leases(s.ns).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "agentenv-scheduler", Namespace: s.ns},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &seconds, RenewTime: lagging()},
	}, metav1.CreateOptions{})
	must(t, err)
	for i := 0; i < 2; i++ {
		s.check("--leader-lease", "agentenv-scheduler").expect(t, 0, "wedged", "wait")
		time.Sleep(time.Second)
		lease.Spec.RenewTime = lagging() // the holder renews, by its lagging clock
		lease, err = env.Client.CoordinationV1().Leases(s.ns).Update(ctx, lease, metav1.UpdateOptions{})
		must(t, err)
	}
}
