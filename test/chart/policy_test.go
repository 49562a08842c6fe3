package chart

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/agentenv/watchdog/internal/testenv"
	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/restart"
)

// The messages of the chart's ValidatingAdmissionPolicy (templates/admissionpolicy.yaml).
const (
	podPolicyMessage     = "may delete only scheduler pods"
	rolloutPolicyMessage = "may only set the pod template's kubectl.kubernetes.io/restartedAt annotation"
)

var dryRunAll = []string{metav1.DryRunAll}

// policyEnforced proves, as the chart's ServiceAccount on the real API server, what
// the chart's admission policy adds to the Role: under restart.method delete, a pod
// outside scheduler.selector cannot be deleted although the Role allows deleting any
// pod of the namespace, while the scheduler pod can; under rollout, no change of the
// scheduler's Deployment but the restartedAt annotation goes through, although the
// Role allows `patch` on it. It returns once the policy is enforced, so the episode
// that follows restarts with the policy on.
func policyEnforced(t *testing.T, ns, method string, sched *scheduler, sa kubernetes.Interface) {
	t.Helper()
	ctx, cancel := testenv.Ctx()
	defer cancel()
	switch method {
	case "delete":
		bystander := createPod(t, ns, "not-the-scheduler", map[string]string{"app.kubernetes.io/name": "agentenv-runtime"})
		// Policies are loaded asynchronously: until then the Role alone decides, and a
		// dry-run delete is allowed (and deletes nothing).
		if err := waitDenied(t, "the policy to deny a pod outside the selector", func() error {
			return sa.CoreV1().Pods(ns).Delete(ctx, bystander, metav1.DeleteOptions{DryRun: dryRunAll})
		}); !strings.Contains(err.Error(), podPolicyMessage) {
			t.Fatalf("dry-run delete of a pod outside the selector: %v, want the policy's message", err)
		}
		// For real: denied, and the message names the selector.
		err := sa.CoreV1().Pods(ns).Delete(ctx, bystander, metav1.DeleteOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), podPolicyMessage) || !strings.Contains(err.Error(), `"app.kubernetes.io/name=agentenv-scheduler"`) {
			t.Fatalf("delete of a pod outside the selector as the chart's identity: %v, want Forbidden by the policy naming the selector", err)
		}
		t.Logf("denied by the API server: %v", err)
		if _, err := env.Client.CoreV1().Pods(ns).Get(ctx, bystander, metav1.GetOptions{}); err != nil {
			t.Fatalf("the bystander pod: %v", err)
		}
		// The Role alone would have allowed it.
		if err := env.Client.CoreV1().Pods(ns).Delete(ctx, bystander, metav1.DeleteOptions{DryRun: dryRunAll}); err != nil {
			t.Fatalf("admin dry-run delete of the bystander: %v (the policy must concern only the watchdog)", err)
		}
		// The scheduler pod can still be deleted (the episode then does it for real).
		if err := sa.CoreV1().Pods(ns).Delete(ctx, sched.pod.Name, metav1.DeleteOptions{DryRun: dryRunAll}); err != nil {
			t.Fatalf("dry-run delete of the scheduler pod as the chart's identity: %v", err)
		}
	case "rollout":
		patch := func(p string) error {
			_, err := sa.AppsV1().Deployments(ns).Patch(ctx, schedDep, types.StrategicMergePatchType, []byte(p), metav1.PatchOptions{DryRun: dryRunAll})
			return err
		}
		at := fmt.Sprintf(`%q:%q`, restart.RestartedAtAnnotation, time.Now().UTC().Format(time.RFC3339))
		err := waitDenied(t, "the policy to deny a Deployment change", func() error {
			return patch(`{"spec":{"replicas":5}}`)
		})
		if !strings.Contains(err.Error(), rolloutPolicyMessage) {
			t.Fatalf("scale through a patch: %v, want the policy's message", err)
		}
		for what, p := range map[string]string{
			"another pod-template annotation":      `{"spec":{"template":{"metadata":{"annotations":{"x":"y"}}}}}`,
			"restartedAt and another annotation":   `{"spec":{"template":{"metadata":{"annotations":{` + at + `,"x":"y"}}}}}`,
			"restartedAt and the image":            `{"spec":{"template":{"metadata":{"annotations":{` + at + `}},"spec":{"containers":[{"name":"scheduler","image":"evil:latest"}]}}}}`,
			"restartedAt and the replicas":         `{"spec":{"replicas":0,"template":{"metadata":{"annotations":{` + at + `}}}}}`,
			"a label of the Deployment":            `{"metadata":{"labels":{"x":"y"}}}`,
			"restartedAt and template finalizers":  `{"spec":{"template":{"metadata":{"annotations":{` + at + `},"finalizers":["example.com/x"]}}}}`,
			"restartedAt and a template name":      `{"spec":{"template":{"metadata":{"annotations":{` + at + `},"name":"x"}}}}`,
			"restartedAt and a generateName":       `{"spec":{"template":{"metadata":{"annotations":{` + at + `},"generateName":"x-"}}}}`,
			"restartedAt and a template namespace": `{"spec":{"template":{"metadata":{"annotations":{` + at + `},"namespace":"` + ns + `"}}}}`,
			"restartedAt and template owners":      `{"spec":{"template":{"metadata":{"annotations":{` + at + `},"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"x","uid":"00000000-0000-0000-0000-000000000001"}]}}}}`,
			"pausing the rollout":                  `{"spec":{"paused":true}}`,
			"lifting the watchdog's pause":         `{"metadata":{"annotations":{"` + decide.PauseUntilAnnotation + `":null}}}`,
			"moving the watchdog's pause":          `{"metadata":{"annotations":{"` + decide.PauseUntilAnnotation + `":"2000-01-01T00:00:00Z"}}}`,
		} {
			if err := patch(p); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), rolloutPolicyMessage) {
				t.Errorf("patch with %s as the chart's identity: %v, want Forbidden by the policy", what, err)
			}
		}
		// The rollout restart itself goes through (the episode then does it for real).
		if err := patch(`{"spec":{"template":{"metadata":{"annotations":{` + at + `}}}}}`); err != nil {
			t.Fatalf("the restartedAt patch as the chart's identity: %v", err)
		}
		// The admin is not concerned.
		if _, err := env.Client.AppsV1().Deployments(ns).Patch(ctx, schedDep, types.StrategicMergePatchType, []byte(`{"spec":{"replicas":5}}`), metav1.PatchOptions{DryRun: dryRunAll}); err != nil {
			t.Fatalf("admin dry-run patch: %v (the policy must concern only the watchdog)", err)
		}
	}
	pauseIsTheOwners(t, ns, sa)
}

// pauseIsTheOwners: the pause annotations on the scheduler Deployment are its
// owners' control over the watchdog: whoever may edit the Deployment sets them,
// and the watchdog's own identity can neither set, move nor lift them (the Role
// grants no patch under restart.method delete; the policy allows only restartedAt
// under rollout).
func pauseIsTheOwners(t *testing.T, ns string, sa kubernetes.Interface) {
	t.Helper()
	ctx, cancel := testenv.Ctx()
	defer cancel()
	pause := []byte(`{"metadata":{"annotations":{"` + decide.PauseUntilAnnotation + `":"` + time.Now().Add(time.Hour).UTC().Format(time.RFC3339) +
		`","` + decide.PauseReasonAnnotation + `":"maintenance"}}}`)
	if _, err := sa.AppsV1().Deployments(ns).Patch(ctx, schedDep, types.StrategicMergePatchType, pause, metav1.PatchOptions{DryRun: dryRunAll}); !apierrors.IsForbidden(err) {
		t.Errorf("the watchdog's identity set a pause on the scheduler Deployment: %v, want Forbidden", err)
	}
	if _, err := env.Client.AppsV1().Deployments(ns).Patch(ctx, schedDep, types.StrategicMergePatchType, pause, metav1.PatchOptions{DryRun: dryRunAll}); err != nil {
		t.Errorf("the scheduler's owner cannot set a pause: %v", err)
	}
}

// waitDenied polls op until the API server answers Forbidden, bounded: a loaded
// policy denies at once, and loading takes about a second. The bound is shorter
// than the 30 s context of the calls, so a policy never enforced reads as such.
func waitDenied(t *testing.T, what string, op func() error) error {
	t.Helper()
	var denied error
	waitFor(t, 20*time.Second, what, func() bool {
		err := op()
		if err != nil && !apierrors.IsForbidden(err) {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		denied = err
		return err != nil
	})
	return denied
}

func createPod(t *testing.T, ns, name string, lbls map[string]string) string {
	t.Helper()
	ctx, cancel := testenv.Ctx()
	defer cancel()
	_, err := env.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/none"}}},
	}, metav1.CreateOptions{})
	must(t, err)
	return name
}

// TestAdmissionPolicySelector: the policy's translation of scheduler.selector into CEL
// agrees with the label selector the watchdog uses, for a selector with every kind of
// term, on pods with and without each label; checked as the chart's ServiceAccount
// on the real API server with dry-run deletes.
func TestAdmissionPolicySelector(t *testing.T) {
	const selector = "app.kubernetes.io/name in (agentenv-scheduler, sched),tier!=canary,!experimental,track,zone notin (z9),app.kubernetes.io/part-of==agentenv"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns, err := env.CreateNamespace(ctx, "chart-vap")
	must(t, err)
	installChart(t, ns, release, fmt.Sprintf("scheduler: {selector: %q}\n", selector))
	_, sa := saKubeconfig(t, ns, fullname)
	sel, err := labels.Parse(selector)
	must(t, err)

	base := map[string]string{"app.kubernetes.io/name": "agentenv-scheduler", "track": "stable", "app.kubernetes.io/part-of": "agentenv"}
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for bk, bv := range base {
			m[bk] = bv
		}
		if v == "-" {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	pods := map[string]map[string]string{
		"base": base, "sched": with("app.kubernetes.io/name", "sched"), "other-name": with("app.kubernetes.io/name", "other"),
		"no-name": with("app.kubernetes.io/name", "-"), "tier-stable": with("tier", "stable"), "tier-canary": with("tier", "canary"),
		"experimental": with("experimental", ""), "no-track": with("track", "-"), "zone-a": with("zone", "a"), "zone-z9": with("zone", "z9"),
		"part-of-other": with("app.kubernetes.io/part-of", "other"), "no-part-of": with("app.kubernetes.io/part-of", "-"), "no-labels": nil,
	}
	for name, l := range pods {
		createPod(t, ns, name, l)
	}
	del := func(name string) error {
		return sa.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{DryRun: dryRunAll})
	}
	if err := waitDenied(t, "the policy to be enforced", func() error { return del("no-labels") }); !strings.Contains(err.Error(), podPolicyMessage) {
		t.Fatalf("delete of a pod without labels: %v, want the policy's message", err)
	}
	matched := 0
	for name, l := range pods {
		want := sel.Matches(labels.Set(l))
		err := del(name)
		switch {
		case want && err != nil:
			t.Errorf("pod %s %v matches %q, yet the policy denies its delete: %v", name, l, selector, err)
		case !want && !(apierrors.IsForbidden(err) && strings.Contains(err.Error(), podPolicyMessage)):
			t.Errorf("pod %s %v does not match %q, yet its delete got %v", name, l, selector, err)
		case want:
			matched++
		}
	}
	if matched < 3 || matched == len(pods) {
		t.Errorf("%d of %d pods match: the cases do not exercise the selector", matched, len(pods))
	}
	t.Logf("%d pods: the policy allowed exactly the %d that %q selects", len(pods), matched, selector)
}

// TestNetworkPolicyOnTheAPIServer: the documented receiver settings (excepts of both
// address families, an in-cluster Alertmanager allowed by an extraEgress rule)
// install on the real API server, which refuses an except that is not a strict
// subset of its block (the old template put 10.0.0.0/8 under ::/0); the stored
// policy selects the CronJob's pods and the `helm test` pod.
func TestNetworkPolicyOnTheAPIServer(t *testing.T) {
	ctx, cancel := testenv.Ctx()
	defer cancel()
	ns, err := env.CreateNamespace(ctx, "chart-netpol")
	must(t, err)
	installChart(t, ns, release, `networkPolicy:
  enabled: true
  apiServer: {cidrs: [127.0.0.1/32]}
  alertReceivers: {except: [10.0.0.0/8, 172.16.0.0/12, fd00::/8]}
  extraEgress:
    - to: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}}]
      ports: [{port: 9093, protocol: TCP}]
alerts: {alertmanagerURLs: ['http://alertmanager.monitoring:9093']}
`)
	np, err := env.Client.NetworkingV1().NetworkPolicies(ns).Get(ctx, fullname, metav1.GetOptions{})
	must(t, err)
	blocks := map[string][]string{}
	for _, e := range np.Spec.Egress {
		for _, peer := range e.To {
			if peer.IPBlock != nil {
				blocks[peer.IPBlock.CIDR] = peer.IPBlock.Except
			}
		}
	}
	if !slices.Equal(blocks["0.0.0.0/0"], []string{"10.0.0.0/8", "172.16.0.0/12"}) || !slices.Equal(blocks["::/0"], []string{"fd00::/8"}) {
		t.Errorf("stored receiver blocks %v, want each except under its own family", blocks)
	}
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	must(t, err)
	cj, err := env.Client.BatchV1().CronJobs(ns).Get(ctx, fullname, metav1.GetOptions{})
	must(t, err)
	doctor := parse(t, mustHelm(t, "get", "hooks", release, "--namespace", ns, "--kubeconfig", env.Kubeconfig)).doctorPod()
	for what, l := range map[string]map[string]string{"the CronJob's pods": cj.Spec.JobTemplate.Spec.Template.Labels, "the helm test pod": doctor.Labels} {
		if !sel.Matches(labels.Set(l)) {
			t.Errorf("the stored policy's podSelector %s does not select %s %v", sel, what, l)
		}
	}
}
