package chart

import (
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/agentenv/watchdog/internal/testenv"
	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/restart"
	"github.com/agentenv/watchdog/pkg/state"
)

// The chart installed on the real API server, the watchdog run as its
// ServiceAccount with its pods' own arguments and environment. Each test installs
// its own release in a namespace of its own (install): none depends on another's
// order or leftovers.

// TestChartEpisode: for each restart method, with the chart's admission policy
// enforced, wedged → restart → recovered, each alert signed with the key of the
// chart's Secret, and the Events the NOTES point at.
func TestChartEpisode(t *testing.T) {
	for _, method := range []string{"delete", "rollout"} {
		t.Run(method, func(t *testing.T) {
			in := install(t, method, "scheduler-metrics-discovery-dead.txt")
			checkNotes(t, in.notes, in.ns)
			// On by default: enforced before the episode restarts anything.
			policyEnforced(t, in.ns, method, in.sched, in.sa)
			episode(t, in, method)
		})
	}
}

func episode(t *testing.T, in *installed, method string) {
	ctx, cancel := testenv.Ctx()
	defer cancel()
	ns, sched, wd, recv, flags := in.ns, in.sched, in.wd, in.recv, in.flags

	first := wd.check(flags...)
	first.expect(t, 0, "wedged", "wait")
	if !first.report.StateWritten {
		t.Fatalf("the chart's identity could not write the state: %+v", first.report)
	}
	// The wedge must outlast --wedged-for in real time: a duration, not a condition.
	time.Sleep(time.Until(first.report.Time.Add(wedgedFor + 100*time.Millisecond)))
	second := wd.check(flags...)
	second.expect(t, 0, "wedged", "restart")
	if len(second.report.Restarts) != 1 || second.report.Restarts[0].Outcome != "done" || second.report.Restarts[0].Method != method {
		t.Fatalf("restart %+v, want one done by %s\nstderr:\n%s", second.report.Restarts, method, second.stderr)
	}

	switch method {
	case "delete":
		if _, err := env.Client.CoreV1().Pods(ns).Get(ctx, sched.pod.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("the wedged pod survived the delete restart: %v", err)
		}
	case "rollout":
		d, err := env.Client.AppsV1().Deployments(ns).Get(ctx, schedDep, metav1.GetOptions{})
		must(t, err)
		at := d.Spec.Template.Annotations[restart.RestartedAtAnnotation]
		if _, perr := time.Parse(time.RFC3339, at); perr != nil {
			t.Fatalf("Deployment pod template annotation %s = %q: %v", restart.RestartedAtAnnotation, at, perr)
		}
		t.Logf("rollout restart: %s=%s on Deployment %s (generation %d)", restart.RestartedAtAnnotation, at, schedDep, d.Generation)
		// No controller manager runs: do the Deployment controller's part.
		must(t, env.Client.CoreV1().Pods(ns).Delete(ctx, sched.pod.Name, metav1.DeleteOptions{}))
		_, err = testenv.SettleDeployment(ctx, env.Client, d)
		must(t, err)
	}

	// The replacement comes up healthy.
	_, err := testenv.CreateSchedulerPod(ctx, env.Client, ns, testenv.PodSpec{Name: "agentenv-scheduler-def34"})
	must(t, err)
	sched.metrics.SetPage(fixture(t, "scheduler-metrics-healthy.txt"))
	third := wd.check(flags...)
	third.expect(t, 0, "healthy", "none")
	recovered := map[string]bool{}
	for _, a := range third.report.Alerts {
		if a.Event == alert.EventRecovered && a.OK {
			recovered[a.Sink] = true
		}
	}
	if !recovered["kubernetes-event"] || !recovered["webhook"] {
		t.Fatalf("no recovered alert delivered to Events and the webhook: %+v\nstderr:\n%s", third.report.Alerts, third.stderr)
	}
	good, bad := recv.got()
	if len(bad) != 0 || !slices.Contains(good, alert.EventRecovered) || !slices.Contains(good, alert.EventRestarted) {
		t.Errorf("webhook got %v signed with the chart Secret's key, %v badly signed", good, bad)
	}
	// The Events the NOTES tell people to look for.
	evs, err := env.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "source=agentenv-scheduler-watchdog"})
	must(t, err)
	reasons := map[string]bool{}
	for _, e := range evs.Items {
		reasons[e.Reason] = true
	}
	if !reasons[alert.Spec(alert.EventRestarted).Reason] || !reasons[alert.Spec(alert.EventRecovered).Reason] {
		t.Errorf("Events by the NOTES' field selector: %v", reasons)
	}
	_, st := stateOf(t, ns)
	if st == nil || len(st.Restarts) != 1 || st.Restarts[0].Method != method || st.Restarts[0].Outcome != state.RestartDone {
		t.Fatalf("state restarts %+v", st)
	}
	for _, r := range []runResult{first, second, third} {
		if strings.Contains(r.stdout+r.stderr, "hooks.invalid") || strings.Contains(r.stdout+r.stderr, hmacKey) {
			t.Errorf("a secret reached the output:\n%s\n%s", r.stdout, r.stderr)
		}
	}
	t.Logf("%s episode as the chart's ServiceAccount: wedged/wait → wedged/restart → healthy (alerts %v)", method, good)
	resourcesFit(t, ns, first, second, third)
}

// TestChartIdentityLimits proves, with real calls and access reviews as the chart's
// ServiceAccount, what it cannot do under each restart method.
func TestChartIdentityLimits(t *testing.T) {
	for _, method := range []string{"delete", "rollout"} {
		t.Run(method, func(t *testing.T) {
			in := install(t, method, "scheduler-metrics-healthy.txt")
			identityLimits(t, in.ns, method, in.sa)
		})
	}
}

// identityLimits proves, with real calls and access reviews as the chart's
// ServiceAccount, what it cannot do.
func identityLimits(t *testing.T, ns, method string, sa kubernetes.Interface) {
	ctx, cancel := testenv.Ctx()
	defer cancel()
	forbidden := func(what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: want Forbidden, got %v", what, err)
		}
	}

	// Secrets: not the chart's own, not Helm's release records, not a list.
	_, err := sa.CoreV1().Secrets(ns).Get(ctx, fullname, metav1.GetOptions{})
	forbidden("get the chart's alert Secret", err)
	_, err = sa.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	forbidden("list Secrets", err)

	// Another namespace: a pod there survives, even one matching the selector.
	other, err := env.CreateNamespace(ctx, "chart-other")
	must(t, err)
	victim, err := testenv.CreateSchedulerPod(ctx, env.Client, other, testenv.PodSpec{Name: "agentenv-scheduler-victim"})
	must(t, err)
	forbidden("delete a pod in another namespace", sa.CoreV1().Pods(other).Delete(ctx, victim.Name, metav1.DeleteOptions{}))
	_, err = sa.CoreV1().Pods(other).List(ctx, metav1.ListOptions{})
	forbidden("list pods in another namespace", err)
	// The same ConfigMap name in another namespace is not its state.
	_, err = env.Client.CoreV1().ConfigMaps(other).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: stateName}}, metav1.CreateOptions{})
	must(t, err)
	cm, err := env.Client.CoreV1().ConfigMaps(other).Get(ctx, stateName, metav1.GetOptions{})
	must(t, err)
	cm.Data = map[string]string{"x": "y"}
	_, err = sa.CoreV1().ConfigMaps(other).Update(ctx, cm, metav1.UpdateOptions{})
	forbidden("update a same-named ConfigMap in another namespace", err)

	// Other ConfigMaps in its own namespace: no read, no write, no create.
	_, err = env.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "scheduler-config"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	must(t, err)
	_, err = sa.CoreV1().ConfigMaps(ns).Get(ctx, "scheduler-config", metav1.GetOptions{})
	forbidden("get another ConfigMap", err)
	_, err = sa.CoreV1().ConfigMaps(ns).Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "scheduler-config", Namespace: ns}, Data: map[string]string{"k": "evil"}}, metav1.UpdateOptions{})
	forbidden("update another ConfigMap", err)
	_, err = sa.CoreV1().ConfigMaps(ns).Patch(ctx, "scheduler-config", types.MergePatchType, []byte(`{"data":{"k":"evil"}}`), metav1.PatchOptions{})
	forbidden("patch another ConfigMap", err)
	forbidden("delete its own state ConfigMap", sa.CoreV1().ConfigMaps(ns).Delete(ctx, stateName, metav1.DeleteOptions{}))

	// The restart right it does not have.
	switch method {
	case "delete":
		_, err = sa.AppsV1().Deployments(ns).Patch(ctx, schedDep, types.StrategicMergePatchType,
			[]byte(`{"spec":{"template":{"metadata":{"annotations":{"x":"y"}}}}}`), metav1.PatchOptions{})
		forbidden("patch the scheduler Deployment under the delete method", err)
	case "rollout":
		forbidden("delete the scheduler pod under the rollout method", sa.CoreV1().Pods(ns).Delete(ctx, "agentenv-scheduler-abc12", metav1.DeleteOptions{}))
	}
	_, err = sa.CoordinationV1().Leases(ns).Update(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "agentenv-scheduler", Namespace: ns}}, metav1.UpdateOptions{})
	forbidden("update another Lease", err)

	// The full picture, from the API server's authorizer.
	type attr struct {
		verb, group, resource, sub, name, ns string
	}
	allowed := []attr{
		{"list", "", "pods", "", "", ns},
		{"list", "discovery.k8s.io", "endpointslices", "", "", ns},
		{"get", "", "configmaps", "", stateName, ns},
		{"update", "", "configmaps", "", stateName, ns},
		{"create", "", "events", "", "", ns},
		// Its own objects, which it creates.
		{"create", "", "configmaps", "", "", ns}, {"create", "", "secrets", "", "", ns},
		{"get", "", "secrets", "", "agentenv-scheduler-watchdog-key", ns},
		{"create", "coordination.k8s.io", "leases", "", "", ns},
		{"get", "coordination.k8s.io", "leases", "", "agentenv-scheduler-watchdog", ns},
		{"update", "coordination.k8s.io", "leases", "", "agentenv-scheduler-watchdog", ns},
		{"get", "apps", "deployments", "", schedDep, ns},
		// scheduler.judgePods deployment (the default): the owner chain by UID.
		{"get", "apps", "replicasets", "", "x", ns},
	}
	denied := []attr{
		{"get", "", "secrets", "", fullname, ns}, {"list", "", "secrets", "", "", ns}, {"watch", "", "secrets", "", "", ns},
		{"get", "", "secrets", "", "", other},
		{"watch", "", "pods", "", "", ns}, {"get", "", "pods", "", "x", ns}, {"create", "", "pods", "", "", ns},
		{"update", "", "pods", "", "x", ns}, {"patch", "", "pods", "", "x", ns}, {"create", "", "pods", "exec", "x", ns},
		{"deletecollection", "", "pods", "", "", ns},
		{"list", "", "pods", "", "", other}, {"delete", "", "pods", "", "x", other},
		{"list", "", "configmaps", "", "", ns}, {"delete", "", "configmaps", "", stateName, ns},
		{"patch", "", "configmaps", "", stateName, ns}, {"get", "", "configmaps", "", "other", ns}, {"update", "", "configmaps", "", stateName, other},
		{"update", "apps", "deployments", "", schedDep, ns}, {"delete", "apps", "deployments", "", schedDep, ns},
		{"get", "apps", "deployments", "", "other", ns}, {"patch", "apps", "deployments", "", "other", ns}, {"list", "apps", "deployments", "", "", ns},
		{"update", "apps", "deployments", "scale", schedDep, ns},
		{"update", "coordination.k8s.io", "leases", "", "agentenv-scheduler", ns},
		{"create", "", "serviceaccounts", "token", fullname, ns},
		{"create", "rbac.authorization.k8s.io", "roles", "", "", ns}, {"update", "rbac.authorization.k8s.io", "roles", "", fullname, ns},
		{"create", "rbac.authorization.k8s.io", "rolebindings", "", "", ns},
		{"bind", "rbac.authorization.k8s.io", "roles", "", "", ns}, {"escalate", "rbac.authorization.k8s.io", "roles", "", "", ns},
		{"create", "rbac.authorization.k8s.io", "clusterroles", "", "", ""},
		{"impersonate", "", "serviceaccounts", "", "", ns},
		{"list", "", "nodes", "", "", ""}, {"list", "", "namespaces", "", "", ""},
		{"delete", "", "events", "", "", ns}, {"update", "", "events", "", "x", ns},
		{"list", "apps", "replicasets", "", "", ns}, {"update", "apps", "replicasets", "", "x", ns}, {"get", "apps", "replicasets", "", "x", other},
	}
	switch method {
	case "delete":
		allowed = append(allowed, attr{"delete", "", "pods", "", "x", ns})
		denied = append(denied, attr{"patch", "apps", "deployments", "", schedDep, ns})
	case "rollout":
		allowed = append(allowed, attr{"patch", "apps", "deployments", "", schedDep, ns})
		denied = append(denied, attr{"delete", "", "pods", "", "x", ns})
	}
	review := func(a attr) bool {
		t.Helper()
		r, err := sa.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: a.ns, Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.sub, Name: a.name,
			}},
		}, metav1.CreateOptions{})
		must(t, err)
		return r.Status.Allowed
	}
	for _, a := range allowed {
		if !review(a) {
			t.Errorf("the chart's identity may not %+v, which the watchdog needs", a)
		}
	}
	for _, a := range denied {
		if review(a) {
			t.Errorf("the chart's identity may %+v", a)
		}
	}
	t.Logf("%s method: %d needed permissions allowed, %d others denied, plus real calls refused", method, len(allowed), len(denied))

	// The victim and the other ConfigMap are untouched.
	if _, err := env.Client.CoreV1().Pods(other).Get(ctx, victim.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("pod in the other namespace: %v", err)
	}
	if cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "scheduler-config", metav1.GetOptions{}); err != nil || cm.Data["k"] != "v" {
		t.Errorf("other ConfigMap changed: %v %v", cm.Data, err)
	}
}

// TestChartOneOffDryRun runs the NOTES recipe for a one-off dry run, on a live
// install and on a shadow install (a dry run is never also shadow mode: the recipe
// turns shadow off for its one run).
func TestChartOneOffDryRun(t *testing.T) {
	t.Run("live", func(t *testing.T) {
		in := install(t, "delete", "scheduler-metrics-healthy.txt")
		oneOffDryRun(t, in.ns, in.notes, in.kubeconfig, in.flags)
	})
	t.Run("shadow", func(t *testing.T) {
		in := installWith(t, "delete", "scheduler-metrics-healthy.txt", "decision: {shadow: true}")
		oneOffDryRun(t, in.ns, in.notes, in.kubeconfig, in.flags)
	})
}

// oneOffDryRun runs the NOTES recipe, as the NOTES print it, with the control
// plane's kubectl: a Job from the CronJob with WATCHDOG_DRY_RUN=true; then runs
// that Job's container.
func oneOffDryRun(t *testing.T, ns, notes, kubeconfig string, flags []string) {
	assets, err := testenv.Assets()
	must(t, err)
	kubectl := filepath.Join(assets, "kubectl")
	_, recipe, ok := strings.Cut(notes, "2. A one-off run now, as a dry run")
	if !ok {
		t.Fatalf("NOTES have no one-off dry-run recipe:\n%s", notes)
	}
	recipe, _, _ = strings.Cut(strings.TrimLeft(recipe[strings.Index(recipe, "\n\n")+2:], " "), "\n\n")
	recipe = strings.ReplaceAll(strings.ReplaceAll(recipe, "kubectl ", kubectl+" "), "$(date +%s)", "1")
	cmd := exec.Command("bash", "-c", "set -euo pipefail\n"+recipe)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Kubeconfig)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("NOTES dry-run recipe: %v\n%s\n%s", err, recipe, out)
	}
	const jobName = fullname + "-dry-1"
	ctx, cancel := testenv.Ctx()
	defer cancel()
	job, err := env.Client.BatchV1().Jobs(ns).Get(ctx, jobName, metav1.GetOptions{})
	must(t, err)
	c := job.Spec.Template.Spec.Containers[0]
	var dry []string
	for _, e := range c.Env {
		if e.Name == "WATCHDOG_DRY_RUN" {
			dry = append(dry, e.Value)
		}
	}
	if len(dry) != 1 || dry[0] != "true" {
		t.Fatalf("one-off Job WATCHDOG_DRY_RUN %v, want exactly [true]", dry)
	}
	if job.Spec.Template.Spec.ServiceAccountName != fullname || job.Spec.ActiveDeadlineSeconds == nil {
		t.Errorf("one-off Job lost the CronJob's pod settings: sa %q deadline %v", job.Spec.Template.Spec.ServiceAccountName, job.Spec.ActiveDeadlineSeconds)
	}
	_, missing := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, stateName, metav1.GetOptions{})
	wd := &chartWatchdog{t: t, args: c.Args, env: containerEnv(t, ns, c, jobName+"-x"), kubeconfig: kubeconfig}
	r := wd.check(flags...)
	if r.code != 0 || !r.report.DryRun || r.report.StateWritten {
		t.Fatalf("one-off dry run: exit %d dryRun %v stateWritten %v\n%s", r.code, r.report.DryRun, r.report.StateWritten, r.stderr)
	}
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, stateName, metav1.GetOptions{}); !apierrors.IsNotFound(missing) || !apierrors.IsNotFound(err) {
		t.Errorf("a dry run created the state ConfigMap (before: %v, after: %v)", missing, err)
	}
	must(t, env.Client.BatchV1().Jobs(ns).Delete(ctx, jobName, metav1.DeleteOptions{}))
}

// TestChartUpgradeKeepsState: `helm upgrade` with new values leaves the state the
// watchdog wrote as it was, and the upgraded configuration works with it.
func TestChartUpgradeKeepsState(t *testing.T) {
	in := install(t, "delete", "scheduler-metrics-healthy.txt")
	seeded := seedState(t, in.ns)
	before, _ := stateOf(t, in.ns)
	in.upgrade("--set", "restart.maxRestarts=5", "--set", "cronjob.suspend=true", "--set", "image.tag=0.1.1")
	after, _ := stateOf(t, in.ns)
	if !maps.Equal(before.Data, after.Data) {
		t.Fatalf("helm upgrade changed the state:\nbefore %v\nafter  %v", before.Data, after.Data)
	}
	if after.Annotations["meta.helm.sh/release-name"] != "" {
		t.Errorf("helm manages the watchdog's state ConfigMap: %v", after.Annotations)
	}
	ctx, cancel := testenv.Ctx()
	defer cancel()
	cj, err := env.Client.BatchV1().CronJobs(in.ns).Get(ctx, fullname, metav1.GetOptions{})
	must(t, err)
	if cj.Spec.Suspend == nil || !*cj.Spec.Suspend {
		t.Errorf("upgrade did not suspend the CronJob")
	}
	// The upgraded configuration and the kept state work together.
	wd := cronJobWatchdog(t, in.ns, in.kubeconfig)
	if !slices.Contains(wd.env, "WATCHDOG_MAX_RESTARTS=5") {
		t.Errorf("upgraded env lacks WATCHDOG_MAX_RESTARTS=5")
	}
	wd.check(in.flags...).expect(t, 0, "healthy", "none")
	if _, st := stateOf(t, in.ns); len(st.Restarts) != 1 || st.Restarts[0].Pod != seeded.Restarts[0].Pod {
		t.Errorf("restart history after upgrade: %+v", st.Restarts)
	}
}

// TestChartReinstallKeepsState: `helm uninstall` leaves the state ConfigMap and
// removes the identity's rights; reinstalling the same release adopts the state
// unchanged; a second release sharing it is refused.
func TestChartReinstallKeepsState(t *testing.T) {
	in := install(t, "delete", "scheduler-metrics-healthy.txt")
	seedState(t, in.ns)
	ctx, cancel := testenv.Ctx()
	defer cancel()
	before, _ := stateOf(t, in.ns)
	in.uninstall()

	after, st := stateOf(t, in.ns)
	if !maps.Equal(before.Data, after.Data) || st == nil || len(st.Restarts) != 1 {
		t.Fatalf("uninstall changed or dropped the state: %v", after.Data)
	}
	for what, err := range map[string]error{
		"Role":           getErr(env.Client.RbacV1().Roles(in.ns).Get(ctx, fullname, metav1.GetOptions{})),
		"RoleBinding":    getErr(env.Client.RbacV1().RoleBindings(in.ns).Get(ctx, fullname, metav1.GetOptions{})),
		"ServiceAccount": getErr(env.Client.CoreV1().ServiceAccounts(in.ns).Get(ctx, fullname, metav1.GetOptions{})),
		"CronJob":        getErr(env.Client.BatchV1().CronJobs(in.ns).Get(ctx, fullname, metav1.GetOptions{})),
		"Secret":         getErr(env.Client.CoreV1().Secrets(in.ns).Get(ctx, fullname, metav1.GetOptions{})),
	} {
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s after uninstall: %v, want NotFound", what, err)
		}
	}
	// The old identity can do nothing any more. (The API server caches a successful
	// token authentication for 10 s, so right after uninstall the token may still
	// authenticate; what it may do is gone with the Role and the binding.)
	old := &chartWatchdog{t: t, args: []string{"check", "--output=json"}, env: []string{"WATCHDOG_NAMESPACE=" + in.ns}, kubeconfig: in.kubeconfig}
	if r := old.check(in.flags...); r.code != 1 || !(strings.Contains(r.stderr, "forbidden") || strings.Contains(r.stderr, "Unauthorized")) {
		t.Errorf("the uninstalled ServiceAccount's token still works: exit %d\n%s", r.code, r.stderr)
	}

	// Reinstalling the same release leaves the watchdog's state as it was.
	mustHelm(t, "install", in.name, chartDir, "--namespace", in.ns, "--kubeconfig", env.Kubeconfig, "-f", in.values)
	again, _ := stateOf(t, in.ns)
	if !maps.Equal(before.Data, again.Data) {
		t.Fatalf("reinstall changed the state:\nbefore %v\nafter  %v", before.Data, again.Data)
	}
	kubeconfig, _ := saKubeconfig(t, in.ns, fullname)
	cronJobWatchdog(t, in.ns, kubeconfig).check(in.flags...).expect(t, 0, "healthy", "none")
	_, st = stateOf(t, in.ns)
	if len(st.Restarts) != 1 || st.LastRun == nil {
		t.Errorf("state after reinstall: restarts %+v lastRun %+v", st.Restarts, st.LastRun)
	}

}

// TestChartStateDeleted: without its ConfigMap the watchdog creates it again at
// its next pass, and writes it.
func TestChartStateDeleted(t *testing.T) {
	in := install(t, "delete", "scheduler-metrics-healthy.txt")
	seedState(t, in.ns)
	ctx, cancel := testenv.Ctx()
	defer cancel()
	must(t, env.Client.CoreV1().ConfigMaps(in.ns).Delete(ctx, stateName, metav1.DeleteOptions{}))
	in.wd.check(in.flags...).expect(t, 0, "healthy", "none")
	cm, st := stateOf(t, in.ns)
	if st == nil || st.LastRun == nil || cm.Labels["app.kubernetes.io/managed-by"] != "agentenv-scheduler-watchdog" {
		t.Errorf("the state after the ConfigMap was deleted: labels %v, state %+v", cm.Labels, st)
	}
}

func getErr[T any](_ T, err error) error { return err }

// TestChartSecretChecksumSalted: checksum/secret, on the Deployment's pod template
// for anyone who can read pods, cannot be used to test guesses of a weak password
// offline (render the chart with the guess, compare digests); it stays the same
// across an upgrade that changes no secret (no pointless roll) and changes with one
// that does. Seen failing first: with the Secret's sha256 alone, the right guess
// reproduced the digest.
func TestChartSecretChecksumSalted(t *testing.T) {
	ctx, cancel := testenv.Ctx()
	defer cancel()
	ns, err := env.CreateNamespace(ctx, "chart-checksum")
	must(t, err)
	values := func(password string) string {
		return "mode: deployment\nalerts: {alertmanagerURLs: ['https://am.example.com'], alertmanagerUsername: watchdog, alertmanagerPassword: " + password + "}\n"
	}
	rel, _ := installChart(t, ns, release, values("hunter2"))
	checksum := func() string {
		t.Helper()
		d, err := env.Client.AppsV1().Deployments(ns).Get(ctx, fullname, metav1.GetOptions{})
		must(t, err)
		return d.Spec.Template.Annotations["checksum/secret"]
	}
	// No key yet to salt it with: none.
	if got := checksum(); got != "" {
		t.Fatalf("checksum/secret %s before the watchdog made its key", got)
	}
	// The watchdog's first pass makes its key (kube.EnsureKey); the next upgrade salts with it.
	_, err = env.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: keySecret},
		Data: map[string][]byte{"key": []byte(strings.Repeat("k", 32))}}, metav1.CreateOptions{})
	must(t, err)
	rel.upgrade()
	installed := checksum()
	if installed == "" {
		t.Fatal("no checksum/secret on the Deployment's pod template")
	}
	// The attacker's offline test: the chart, the release's names, every value but
	// the password, and a dictionary that holds it.
	for _, guess := range []string{"password", "letmein", "hunter2"} {
		out := mustHelm(t, "template", release, chartDir, "--namespace", ns, "--kube-version", renderKubeVersion, "-f", valuesFile(t, values(guess)), "--show-only", "templates/secret.yaml")
		// The template's own text, as the chart hashes it: without helm's
		// "---" and "# Source:" lines, with and without the final newline.
		body := out[strings.Index(out, "\n# Source:")+1:]
		body = body[strings.Index(body, "\n")+1:]
		for _, text := range []string{body, strings.TrimSuffix(body, "\n"), "\n" + body} {
			if fmt.Sprintf("%x", sha256.Sum256([]byte(text))) == installed {
				t.Fatalf("checksum/secret matches the Secret rendered with the guess %q: the password can be found offline", guess)
			}
		}
	}
	rel.upgrade()
	if got := checksum(); got != installed {
		t.Errorf("an upgrade that changed no secret changed checksum/secret: %s → %s", installed, got)
	}
	rel.upgrade("--set", "alerts.alertmanagerPassword=correct-horse")
	if got := checksum(); got == installed {
		t.Errorf("a changed password left checksum/secret as it was")
	}
	s, err := env.Client.CoreV1().Secrets(ns).Get(ctx, fullname, metav1.GetOptions{})
	must(t, err)
	if _, ok := s.Data["outbox-key"]; ok {
		t.Errorf("the chart generated an outbox-key")
	}
}

// commit010 is a landed commit of main with the chart at 0.1.0 (it generated outbox-key
// into its Secret at install).
const commit010 = "2e05204cdf8f0c503e07fc1c12e762e4a61657da"

// chartAt is the chart as it was at a commit (git archive; a shallow clone lacks old ones).
func chartAt(t *testing.T, commit string) string {
	t.Helper()
	old := t.TempDir()
	archive := exec.Command("sh", "-c", "git archive "+commit+" charts/agentenv-scheduler-watchdog | tar -x -C "+old)
	archive.Dir = filepath.Dir(filepath.Dir(chartDir))
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("the chart at %s from git (a shallow clone lacks it): %v\n%s", commit, err, out)
	}
	return filepath.Join(old, "charts", "agentenv-scheduler-watchdog")
}

// TestChartUpgradeFrom010KeepsKey: a release of the 0.1.0 chart, upgraded to this
// one, keeps its Secret and the outbox-key in it (helm.sh/resource-policy: keep);
// the first pass as the chart's ServiceAccount creates the key Secret seeded with
// that key; a dry run before it creates nothing; later upgrades change nothing.
func TestChartUpgradeFrom010KeepsKey(t *testing.T) {
	ctx, cancel := testenv.Ctx()
	defer cancel()
	ns, err := env.CreateNamespace(ctx, "chart-from-010")
	must(t, err)
	mustHelm(t, "install", release, chartAt(t, commit010), "--namespace", ns, "--kubeconfig", env.Kubeconfig)
	secret := func() *corev1.Secret {
		s, err := env.Client.CoreV1().Secrets(ns).Get(ctx, fullname, metav1.GetOptions{})
		must(t, err)
		return s
	}
	legacy := secret().Data["outbox-key"]
	if len(legacy) != 43 {
		t.Fatalf("the 0.1.0 chart's outbox-key has %d bytes, want 43", len(legacy))
	}
	rel := &releaseT{t: t, ns: ns, name: release, values: valuesFile(t, "")}
	rel.upgrade()
	if s := secret(); string(s.Data["outbox-key"]) != string(legacy) || s.Annotations["helm.sh/resource-policy"] != "keep" {
		t.Fatalf("after the upgrade the Secret's outbox-key changed or it is not kept: %v", s.Annotations)
	}
	sched := layOutScheduler(t, ns, fixture(t, "scheduler-metrics-healthy.txt"))
	kubeconfig, _ := saKubeconfig(t, ns, fullname)
	wd := cronJobWatchdog(t, ns, kubeconfig)
	flags := []string{"--metrics-port", strconv.Itoa(sched.metrics.Port()), "--startup-grace", "1s", "--scrape-timeout", "1s"}
	wd.check(append(flags, "--dry-run")...).expect(t, 0, "healthy", "none")
	if _, err := env.Client.CoreV1().Secrets(ns).Get(ctx, keySecret, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a dry run created the key Secret: %v", err)
	}
	wd.check(flags...).expect(t, 0, "healthy", "none")
	key, err := env.Client.CoreV1().Secrets(ns).Get(ctx, keySecret, metav1.GetOptions{})
	must(t, err)
	if string(key.Data["key"]) != string(legacy) {
		t.Fatalf("the key Secret was not seeded with the 0.1.0 key")
	}
	rel.upgrade("--reuse-values") // values added since are defaulted in the templates
	again, err := env.Client.CoreV1().Secrets(ns).Get(ctx, keySecret, metav1.GetOptions{})
	must(t, err)
	if string(again.Data["key"]) != string(legacy) || string(secret().Data["outbox-key"]) != string(legacy) {
		t.Fatalf("a second upgrade changed a key")
	}
}

// TestChartDeploymentMode installs mode: deployment with 2 replicas and an HA
// scheduler, then runs two `watchdog run` processes as the chart's ServiceAccount
// with the Deployment's environment: one leads through the pre-created Lease (the Role
// grants no create), both report healthy, the leader judges through the scheduler's
// Lease, and on SIGTERM leadership moves over.
func TestChartDeploymentMode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns, err := env.CreateNamespace(ctx, "chart-run")
	must(t, err)
	sched := layOutScheduler(t, ns, fixture(t, "scheduler-metrics-healthy.txt"))
	holder := sched.pod.Name
	_, err = env.Client.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "agentenv-scheduler"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder},
	}, metav1.CreateOptions{})
	must(t, err)
	_, notes := installChart(t, ns, release, "mode: deployment\ndeployment: {replicas: 2}\nscheduler: {leaderLease: agentenv-scheduler}\n")
	if !strings.Contains(notes, "get lease agentenv-scheduler-watchdog") {
		t.Errorf("NOTES do not show the election Lease:\n%s", notes)
	}
	if _, err := env.Client.CoordinationV1().Leases(ns).Get(ctx, "agentenv-scheduler-watchdog", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the watchdog's Lease before its first pass: %v, want none (the chart renders none)", err)
	}
	d, err := env.Client.AppsV1().Deployments(ns).Get(ctx, fullname, metav1.GetOptions{})
	must(t, err)
	// Two replicas: the API server took the PodDisruptionBudget and the spread as rendered.
	pdb, err := env.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, fullname, metav1.GetOptions{})
	must(t, err)
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 || len(d.Spec.Template.Spec.TopologySpreadConstraints) != 2 {
		t.Errorf("stored PodDisruptionBudget maxUnavailable %v, topologySpreadConstraints %+v", pdb.Spec.MaxUnavailable, d.Spec.Template.Spec.TopologySpreadConstraints)
	}
	c := d.Spec.Template.Spec.Containers[0]
	kubeconfig, _ := saKubeconfig(t, ns, fullname)

	procs := map[string]*runProc{}
	for _, pod := range []string{fullname + "-a", fullname + "-b"} {
		procs[pod] = startRun(t, c.Args, containerEnv(t, ns, c, pod),
			"--kubeconfig", kubeconfig, "--metrics-port", strconv.Itoa(sched.metrics.Port()), "--interval", "1s", "--scrape-timeout", "1s")
	}
	leader := waitHolder(t, ns, func(h string) bool { return procs[h] != nil })
	follower := fullname + "-a"
	if leader == follower {
		follower = fullname + "-b"
	}
	waitFor(t, 30*time.Second, "a pass by the leader recorded in the state", func() bool {
		_, st := stateOf(t, ns)
		return st != nil && st.LastRun != nil && st.LastRun.Verdict == "healthy"
	})
	for pod, p := range procs {
		waitFor(t, 30*time.Second, pod+" /healthz 200", func() bool { return p.get("/healthz") == http.StatusOK })
	}
	if body := procs[leader].body("/metrics"); !strings.Contains(body, "agentenv_watchdog_leader 1") || !strings.Contains(body, "agentenv_watchdog_passes_total") {
		t.Errorf("leader metrics:\n%s", body)
	}
	if body := procs[follower].body("/metrics"); !strings.Contains(body, "agentenv_watchdog_leader 0") {
		t.Errorf("follower metrics:\n%s", body)
	}

	// Memory of a long-running watchdog after several passes, against the chart's
	// request (VmHWM: the peak of the process's own address space since its exec).
	waitFor(t, 30*time.Second, "three passes by the leader", func() bool { return procs[leader].passes() >= 3 })
	hwm := procs[leader].peakRSS(t)
	req := c.Resources.Requests.Memory()
	t.Logf("measured: leader's peak RSS after %s of 1 s passes: %.1f MiB; chart requests %s / limits %s memory",
		procs[leader].age().Round(time.Second), float64(hwm)/(1<<20), req, c.Resources.Limits.Memory())
	if hwm > req.Value() || 2*hwm > c.Resources.Limits.Memory().Value() {
		t.Errorf("watchdog run's peak RSS %d does not fit the request %s with 2x headroom under the limit", hwm, req)
	}

	// SIGTERM the leader: it releases the Lease and the follower takes over.
	if code := procs[leader].stop(); code != 0 {
		t.Errorf("leader exit %d on SIGTERM\n%s", code, procs[leader].stderr.String())
	}
	waitHolder(t, ns, func(h string) bool { return h == follower })
	if code := procs[follower].stop(); code != 0 {
		t.Errorf("follower exit %d on SIGTERM\n%s", code, procs[follower].stderr.String())
	}
	for pod, p := range procs {
		if s := p.stderr.String(); strings.Contains(s, "forbidden") {
			t.Errorf("%s hit a permission it lacks:\n%s", pod, s)
		}
	}
}
