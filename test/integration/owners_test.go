package integration

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentenv/watchdog/internal/testenv"
	"github.com/agentenv/watchdog/pkg/restart"
)

// TestRolloutOwnerChainByUID: a pod is judged (--judge-pods deployment, the
// default) and the rollout method restarts it only when the API server says, by
// UID, that the pod's ReplicaSet is the one it names and that this ReplicaSet is
// controlled by --deployment as read. By default a forged link with the right
// names leaves the pod not judged, naming the link; judging every pod
// (--judge-pods selector), the rollout gate blocks its restart, naming the link.
// The genuine chain restarts (TestRolloutRestartMethod, whose pod is the
// Deployment's ReplicaSet's).
func TestRolloutOwnerChainByUID(t *testing.T) {
	for _, tc := range []struct {
		name string
		pod  func(t *testing.T, ns string) testenv.PodSpec
		want string
	}{
		{"pod names the ReplicaSet with a wrong UID", func(t *testing.T, ns string) testenv.PodSpec {
			return testenv.PodSpec{Name: "agentenv-scheduler-7d9c4-forged", Owner: testenv.DefaultReplicaSet("agentenv-scheduler"), OwnerUID: "0b5e55ed-0000-4000-8000-000000000001"}
		}, `names ReplicaSet agentenv-scheduler-7d9c4 with uid "0b5e55ed-0000-4000-8000-000000000001", but ReplicaSet agentenv-scheduler-7d9c4 has uid`},
		{"ReplicaSet names the Deployment with a wrong UID", func(t *testing.T, ns string) testenv.PodSpec {
			ctx, cancel := testenv.Ctx()
			defer cancel()
			_, err := testenv.CreateReplicaSet(ctx, env.Client, ns, "agentenv-scheduler-5f6b8", "agentenv-scheduler", "0b5e55ed-0000-4000-8000-000000000002")
			must(t, err)
			return testenv.PodSpec{Name: "agentenv-scheduler-5f6b8-forged", Owner: "agentenv-scheduler-5f6b8"}
		}, `ReplicaSet agentenv-scheduler-5f6b8 (of pod agentenv-scheduler-5f6b8-forged) names Deployment agentenv-scheduler with uid "0b5e55ed-0000-4000-8000-000000000002", but Deployment agentenv-scheduler has uid`},
		{"ReplicaSet named by the pod does not exist", func(t *testing.T, ns string) testenv.PodSpec {
			return testenv.PodSpec{Name: "agentenv-scheduler-9z9z9-forged", Owner: "agentenv-scheduler-9z9z9"}
		}, "ReplicaSet agentenv-scheduler-9z9z9 named by pod agentenv-scheduler-9z9z9-forged's controller reference does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-discovery-dead.txt"), noPod: true})
			ctx, cancel := testenv.Ctx()
			defer cancel()
			var err error
			s.pod, err = testenv.CreateSchedulerPod(ctx, env.Client, s.ns, tc.pod(t, s.ns))
			must(t, err)

			byDefault := s.check("--restart-method", "rollout")
			byDefault.expect(t, 0, "unknown", "none")
			if len(byDefault.report.NotJudged) != 1 || !strings.Contains(byDefault.report.NotJudged[0].Reason, tc.want) {
				t.Errorf("by default: not judged %+v\nwant the pod, with %q", byDefault.report.NotJudged, tc.want)
			}

			s.check("--restart-method", "rollout", "--judge-pods", "selector").expect(t, 0, "wedged", "wait")
			waitPastWedgedFor()
			r := s.check("--restart-method", "rollout", "--judge-pods", "selector")
			r.expect(t, 0, "wedged", "blocked")
			if !strings.Contains(r.report.Reason, tc.want) {
				t.Errorf("reason %q\nlacks %q", r.report.Reason, tc.want)
			}
			d, err := env.Client.AppsV1().Deployments(s.ns).Get(ctx, "agentenv-scheduler", metav1.GetOptions{})
			must(t, err)
			if at, ok := d.Spec.Template.Annotations[restart.RestartedAtAnnotation]; ok {
				t.Errorf("the Deployment was rolled (%s=%s) for a pod it does not run", restart.RestartedAtAnnotation, at)
			}
		})
	}
}

// TestACanaryDoesNotTurnHealingOff, on the real API server (owner chains by UID): a
// canary Deployment's pod and a bare debug pod carry the scheduler's labels
// beside the wedged scheduler pod. Judging every pod the selector matches
// (--judge-pods selector, what every install did before), three pods are judged
// and the single-target gate blocks the restart, run after run. By default only
// the pod whose owner chain, by UID, leads to --deployment is judged: it is
// restarted, even with --max-pods 1, and the others are reported as not judged,
// with why, and left alone. Seen failing first: with the default, blocked by
// the single-target gate.
func TestACanaryDoesNotTurnHealingOff(t *testing.T) {
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-discovery-dead.txt")})
	canary := s.addCanary()
	ctx, cancel := testenv.Ctx()
	defer cancel()
	debug, err := testenv.CreateSchedulerPod(ctx, env.Client, s.ns, testenv.PodSpec{Name: "scheduler-debug", Owner: "-"})
	must(t, err)

	s.check("--judge-pods", "selector").expect(t, 0, "wedged", "wait")
	waitPastWedgedFor()
	all := s.check("--judge-pods", "selector")
	all.expect(t, 0, "wedged", "blocked")
	if !strings.Contains(all.report.Reason, "3 scheduler pods are judged and no --leader-lease is set") {
		t.Errorf("judging every pod: %s", all.report.Reason)
	}

	r := s.check("--max-pods", "1")
	r.expect(t, 0, "wedged", "restart")
	if len(r.report.Targets) != 1 || r.report.Targets[0].Pod != s.pod.Name {
		t.Errorf("judged %+v, want the scheduler pod alone", r.report.Targets)
	}
	why := map[string]string{}
	for _, n := range r.report.NotJudged {
		why[n.Pod] = n.Reason
	}
	if !strings.Contains(why[canary.Name], "not a pod of Deployment agentenv-scheduler: its controller is ReplicaSet agentenv-scheduler-canary-7d9c4") ||
		!strings.Contains(why[debug.Name], "not a pod of Deployment agentenv-scheduler: it has no controller") || len(why) != 2 {
		t.Errorf("not judged: %q", why)
	}
	if s.podExists(s.pod.Name) {
		t.Error("the wedged scheduler pod was not restarted")
	}
	if !s.podExists(canary.Name) || !s.podExists(debug.Name) {
		t.Error("a pod that is not the Deployment's was deleted")
	}
}

// addCanary runs a canary beside the scheduler: a Deployment of its own
// ("agentenv-scheduler-canary", with its ReplicaSet) and its pod, with the
// scheduler's labels.
func (s *scenario) addCanary() *corev1.Pod {
	s.t.Helper()
	ctx, cancel := testenv.Ctx()
	defer cancel()
	_, err := testenv.CreateDeployment(ctx, env.Client, s.ns, "agentenv-scheduler-canary")
	must(s.t, err)
	canary, err := testenv.CreateSchedulerPod(ctx, env.Client, s.ns, testenv.PodSpec{Name: "agentenv-scheduler-canary-7d9c4-c4n4r", Owner: testenv.DefaultReplicaSet("agentenv-scheduler-canary")})
	must(s.t, err)
	return canary
}
