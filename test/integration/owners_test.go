package integration

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentenv/watchdog/internal/testenv"
	"github.com/agentenv/watchdog/pkg/restart"
)

// TestRolloutOwnerChainByUID: the rollout method restarts a pod only when the
// API server says, by UID, that the pod's ReplicaSet is the one it names and that
// this ReplicaSet is controlled by --deployment as read. Forged links with the
// right names are blocked, naming the link; the genuine chain restarts
// (TestRolloutRestartMethod, whose pod is the Deployment's ReplicaSet's).
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

			s.check("--restart-method", "rollout").expect(t, 0, "wedged", "wait")
			waitPastWedgedFor()
			r := s.check("--restart-method", "rollout")
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
