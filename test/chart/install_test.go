package chart

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/agentenv/watchdog/internal/testenv"
	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/check"
	"github.com/agentenv/watchdog/pkg/restart"
	"github.com/agentenv/watchdog/pkg/state"
	"github.com/agentenv/watchdog/pkg/statestore"
)

const (
	release   = "wd"
	fullname  = "wd-agentenv-scheduler-watchdog"
	stateName = "agentenv-scheduler-watchdog"
	schedDep  = "agentenv-scheduler"
	hmacKey   = "chart-test-hmac-key"
)

// ---- the release ------------------------------------------------------------------

// release is the chart installed in one namespace of the test API server.
type releaseT struct {
	t      *testing.T
	ns     string
	name   string
	values string // path of the values file
}

func installChart(t *testing.T, ns, name, values string, extra ...string) (*releaseT, string) {
	t.Helper()
	r := &releaseT{t: t, ns: ns, name: name, values: valuesFile(t, values)}
	out := mustHelm(t, append([]string{"install", name, chartDir, "--namespace", ns, "--kubeconfig", env.Kubeconfig, "-f", r.values}, extra...)...)
	return r, out
}

func (r *releaseT) upgrade(extra ...string) {
	r.t.Helper()
	mustHelm(r.t, append([]string{"upgrade", r.name, chartDir, "--namespace", r.ns, "--kubeconfig", env.Kubeconfig, "-f", r.values}, extra...)...)
}

func (r *releaseT) uninstall() {
	r.t.Helper()
	mustHelm(r.t, "uninstall", r.name, "--namespace", r.ns, "--kubeconfig", env.Kubeconfig)
}

// ---- the chart's identity -----------------------------------------------------------

// saToken returns a TokenRequest token for the chart's ServiceAccount: the identity
// the CronJob's pod would have.
func saToken(t *testing.T, ns, sa string) string {
	t.Helper()
	ctx, cancel := testenv.Ctx()
	defer cancel()
	seconds := int64(3600)
	tr, err := env.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds},
	}, metav1.CreateOptions{})
	must(t, err)
	return tr.Status.Token
}

var kubeconfigSeq struct {
	sync.Mutex
	n int
}

func saKubeconfig(t *testing.T, ns, sa string) (string, kubernetes.Interface) {
	t.Helper()
	token := saToken(t, ns, sa)
	kubeconfigSeq.Lock()
	kubeconfigSeq.n++
	name := fmt.Sprintf("%s-%s-%d", ns, sa, kubeconfigSeq.n)
	kubeconfigSeq.Unlock()
	path, err := env.WriteKubeconfig(name, token)
	must(t, err)
	cfg := &rest.Config{Host: env.Config.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: env.Config.CAData}, QPS: 200, Burst: 400}
	client, err := kubernetes.NewForConfig(cfg)
	must(t, err)
	return path, client
}

// containerEnv resolves a container's environment as the kubelet would: plain values,
// Secret keys (read as admin), the pod name; the memory limit is left out.
func containerEnv(t *testing.T, ns string, c corev1.Container, podName string) []string {
	t.Helper()
	ctx, cancel := testenv.Ctx()
	defer cancel()
	var out []string
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			out = append(out, e.Name+"="+e.Value)
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			s, err := env.Client.CoreV1().Secrets(ns).Get(ctx, ref.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) && ref.Optional != nil && *ref.Optional {
				continue
			}
			must(t, err)
			v, ok := s.Data[ref.Key]
			if !ok {
				if ref.Optional != nil && *ref.Optional {
					continue
				}
				t.Fatalf("Secret %s has no key %s", ref.Name, ref.Key)
			}
			out = append(out, e.Name+"="+string(v))
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			out = append(out, e.Name+"="+podName)
		case e.ValueFrom.ResourceFieldRef != nil:
			// GOMEMLIMIT: the kubelet would fill in the limit; irrelevant here.
		default:
			t.Fatalf("cannot resolve env %s: %+v", e.Name, e.ValueFrom)
		}
	}
	return out
}

// chartWatchdog runs the watchdog binary as the chart's CronJob would: its args and
// environment as installed, its ServiceAccount's token, plus test-only flags (flags
// beat environment variables).
type chartWatchdog struct {
	t          *testing.T
	args       []string
	env        []string
	kubeconfig string
}

func cronJobWatchdog(t *testing.T, ns, kubeconfig string) *chartWatchdog {
	t.Helper()
	ctx, cancel := testenv.Ctx()
	defer cancel()
	cj, err := env.Client.BatchV1().CronJobs(ns).Get(ctx, fullname, metav1.GetOptions{})
	must(t, err)
	c := cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0]
	return &chartWatchdog{t: t, args: c.Args, env: containerEnv(t, ns, c, fullname+"-manual"), kubeconfig: kubeconfig}
}

type runResult struct {
	code           int
	report         check.Report
	stdout, stderr string
	// maxRSS and cpu are the process's peak resident memory and CPU time (user +
	// system), from its rusage: what the chart's resources are sized from.
	maxRSS int64
	cpu    time.Duration
}

func (w *chartWatchdog) check(flags ...string) runResult {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	usage := filepath.Join(w.t.TempDir(), "rusage.json")
	args := append(append(append([]string{usage, watchdogBin}, w.args...), "--kubeconfig", w.kubeconfig), flags...)
	cmd := exec.CommandContext(ctx, rusageBin, args...)
	cmd.Env = w.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := runResult{stdout: stdout.String(), stderr: stderr.String()}
	if raw, rerr := os.ReadFile(usage); rerr == nil {
		var ru struct{ MaxRSSBytes, CPUNanos int64 }
		if json.Unmarshal(raw, &ru) == nil {
			r.maxRSS, r.cpu = ru.MaxRSSBytes, time.Duration(ru.CPUNanos)
		}
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else if err != nil {
		w.t.Fatalf("run watchdog: %v", err)
	}
	if r.code != 2 && stdout.Len() > 0 {
		if err := json.Unmarshal(stdout.Bytes(), &r.report); err != nil {
			w.t.Fatalf("stdout is not one JSON report (is run.output json?): %v\n%s", err, r.stdout)
		}
	}
	return r
}

func (r runResult) expect(t *testing.T, code int, verdict, action string) {
	t.Helper()
	if r.code != code || string(r.report.Verdict) != verdict || string(r.report.Action) != action {
		t.Fatalf("got exit %d %s/%s (%s), want exit %d %s/%s\nstdout:\n%s\nstderr:\n%s", r.code, r.report.Verdict, r.report.Action, r.report.Reason, code, verdict, action, r.stdout, r.stderr)
	}
}

// ---- the simulated scheduler ---------------------------------------------------------

type scheduler struct {
	ns      string
	metrics *testenv.MetricsServer
	pod     *corev1.Pod
}

func layOutScheduler(t *testing.T, ns, page string) *scheduler {
	t.Helper()
	ctx, cancel := testenv.Ctx()
	defer cancel()
	_, err := testenv.CreateDeployment(ctx, env.Client, ns, schedDep)
	must(t, err)
	must(t, testenv.CreateNodeSlices(ctx, env.Client, ns, "agentenv-nodes", 3, 100))
	s := &scheduler{ns: ns, metrics: testenv.NewMetricsServer(page)}
	t.Cleanup(s.metrics.Close)
	s.pod, err = testenv.CreateSchedulerPod(ctx, env.Client, ns, testenv.PodSpec{Name: "agentenv-scheduler-abc12"})
	must(t, err)
	return s
}

func fixture(t testing.TB, name string) string {
	t.Helper()
	page, err := testenv.Fixture(name)
	must(t, err)
	return page
}

func stateOf(t *testing.T, ns string) (*corev1.ConfigMap, *state.State) {
	t.Helper()
	ctx, cancel := testenv.Ctx()
	defer cancel()
	cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, stateName, metav1.GetOptions{})
	must(t, err)
	raw, ok := cm.Data[statestore.DataKey]
	if !ok {
		return cm, nil
	}
	st, err := state.Decode([]byte(raw))
	must(t, err)
	return cm, st
}

// receiver is a loopback webhook that checks each alert's HMAC signature.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	events []string
	bad    []string
}

func newReceiver(t *testing.T, key string) *receiver {
	r := &receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		ts, sig := req.Header.Get(alert.HeaderTimestamp), req.Header.Get(alert.HeaderSignature)
		r.mu.Lock()
		defer r.mu.Unlock()
		if sig != "sha256="+alert.Sign([]byte(key), ts, body) {
			r.bad = append(r.bad, req.Header.Get(alert.HeaderEvent))
		} else {
			r.events = append(r.events, req.Header.Get(alert.HeaderEvent))
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) got() (good, bad []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string{}, r.events...), append([]string{}, r.bad...)
}

// ---- the episode ---------------------------------------------------------------------

// TestChartEpisode installs the chart and runs the watchdog as the chart's
// ServiceAccount, with the CronJob's own environment, through wedged → restart →
// recovered for each restart method; then proves what that identity cannot do, that
// `helm upgrade` keeps the state, and that uninstall + reinstall keeps it consistent.
func TestChartEpisode(t *testing.T) {
	for _, method := range []string{"delete", "rollout"} {
		t.Run(method, func(t *testing.T) {
			ctx, cancel := testenv.Ctx()
			defer cancel()
			ns, err := env.CreateNamespace(ctx, "chart-"+method)
			must(t, err)
			values := fmt.Sprintf("restart: {method: %s}\nalerts: {webhookURL: 'https://hooks.invalid/watchdog', webhookSecret: %s, clusterName: envtest}\n", method, hmacKey)
			rel, notes := installChart(t, ns, release, values)
			checkNotes(t, notes, ns)

			sched := layOutScheduler(t, ns, fixture(t, "scheduler-metrics-discovery-dead.txt"))
			kubeconfig, saClient := saKubeconfig(t, ns, fullname)
			wd := cronJobWatchdog(t, ns, kubeconfig)
			recv := newReceiver(t, hmacKey)
			flags := []string{
				"--metrics-port", strconv.Itoa(sched.metrics.Port()),
				"--startup-grace", "1s", "--wedged-for", "2s", "--confirm-window", "0", "--scrape-timeout", "1s",
				// The chart's Secret holds an https URL; point the sink at the loopback
				// receiver. The HMAC key still comes from the chart's Secret.
				"--webhook-url", recv.URL,
			}

			// The chart's admission policy is on by default: enforced before the episode.
			t.Run("admission policy", func(t *testing.T) { policyEnforced(t, ns, method, sched, saClient) })
			episode(t, ns, method, sched, wd, recv, flags)
			t.Run("identity limits", func(t *testing.T) { identityLimits(t, ns, method, saClient) })
			t.Run("one-off dry run from NOTES", func(t *testing.T) { oneOffDryRun(t, ns, kubeconfig, flags) })
			t.Run("upgrade keeps state", func(t *testing.T) { upgradeKeepsState(t, rel, wd, flags) })
			t.Run("uninstall and reinstall", func(t *testing.T) { reinstallKeepsState(t, rel, kubeconfig, flags) })
			t.Run("state ConfigMap deleted", func(t *testing.T) { stateDeleted(t, rel, recv, flags) })
		})
	}
}

func episode(t *testing.T, ns, method string, sched *scheduler, wd *chartWatchdog, recv *receiver, flags []string) {
	ctx, cancel := testenv.Ctx()
	defer cancel()

	first := wd.check(flags...)
	first.expect(t, 0, "wedged", "wait")
	if !first.report.StateWritten {
		t.Fatalf("the chart's identity could not write the state: %+v", first.report)
	}
	time.Sleep(2100 * time.Millisecond)
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
	if len(bad) != 0 || !contains(good, alert.EventRecovered) || !contains(good, alert.EventRestarted) {
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

// resourcesFit: the measured peak RSS of the runs fits the chart's memory request
// with room to spare under the limit.
func resourcesFit(t *testing.T, ns string, runs ...runResult) {
	t.Helper()
	ctx, cancel := testenv.Ctx()
	defer cancel()
	cj, err := env.Client.BatchV1().CronJobs(ns).Get(ctx, fullname, metav1.GetOptions{})
	must(t, err)
	res := cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Resources
	var peak int64
	var cpus []string
	for _, r := range runs {
		peak = max(peak, r.maxRSS)
		cpus = append(cpus, r.cpu.Round(time.Millisecond).String())
	}
	t.Logf("measured per check: peak RSS %.1f MiB, CPU %s; chart requests %s / limits %s memory",
		float64(peak)/(1<<20), strings.Join(cpus, ", "), res.Requests.Memory(), res.Limits.Memory())
	if peak == 0 {
		t.Fatal("no rusage measured")
	}
	if peak > res.Requests.Memory().Value() || 2*peak > res.Limits.Memory().Value() {
		t.Errorf("peak RSS %d bytes does not fit the request %s with 2x headroom under the limit %s", peak, res.Requests.Memory(), res.Limits.Memory())
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func checkNotes(t *testing.T, notes, ns string) {
	t.Helper()
	for _, want := range []string{
		"kubectl -n " + ns + " logs job/$job",
		"--from=cronjob/" + fullname,
		"kubectl set env --local -f - WATCHDOG_DRY_RUN=true",
		"get configmap " + stateName + ` -o jsonpath='{.data.state\.json}'`,
		`"spec":{"suspend":true}`,
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("NOTES lack %q:\n%s", want, notes)
		}
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
	_, err = sa.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "sneaky"}}, metav1.CreateOptions{})
	forbidden("create a ConfigMap", err)
	forbidden("delete its own state ConfigMap", sa.CoreV1().ConfigMaps(ns).Delete(ctx, stateName, metav1.DeleteOptions{}))

	// The restart right it does not have.
	switch method {
	case "delete":
		_, err = sa.AppsV1().Deployments(ns).Patch(ctx, schedDep, types.StrategicMergePatchType,
			[]byte(`{"spec":{"template":{"metadata":{"annotations":{"x":"y"}}}}}`), metav1.PatchOptions{})
		forbidden("patch the scheduler Deployment under the delete method", err)
	case "rollout":
		forbidden("delete the scheduler pod under the rollout method", sa.CoreV1().Pods(ns).Delete(ctx, "agentenv-scheduler-def34", metav1.DeleteOptions{}))
	}
	_, err = sa.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	forbidden("create a Lease", err)

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
		{"get", "apps", "deployments", "", schedDep, ns},
	}
	denied := []attr{
		{"get", "", "secrets", "", fullname, ns}, {"list", "", "secrets", "", "", ns}, {"watch", "", "secrets", "", "", ns},
		{"get", "", "secrets", "", "", other},
		{"watch", "", "pods", "", "", ns}, {"get", "", "pods", "", "x", ns}, {"create", "", "pods", "", "", ns},
		{"update", "", "pods", "", "x", ns}, {"patch", "", "pods", "", "x", ns}, {"create", "", "pods", "exec", "x", ns},
		{"deletecollection", "", "pods", "", "", ns},
		{"list", "", "pods", "", "", other}, {"delete", "", "pods", "", "x", other},
		{"list", "", "configmaps", "", "", ns}, {"create", "", "configmaps", "", "", ns}, {"delete", "", "configmaps", "", stateName, ns},
		{"patch", "", "configmaps", "", stateName, ns}, {"get", "", "configmaps", "", "other", ns}, {"update", "", "configmaps", "", stateName, other},
		{"update", "apps", "deployments", "", schedDep, ns}, {"delete", "apps", "deployments", "", schedDep, ns},
		{"get", "apps", "deployments", "", "other", ns}, {"patch", "apps", "deployments", "", "other", ns}, {"list", "apps", "deployments", "", "", ns},
		{"update", "apps", "deployments", "scale", schedDep, ns},
		{"create", "coordination.k8s.io", "leases", "", "", ns}, {"update", "coordination.k8s.io", "leases", "", "agentenv-scheduler", ns},
		{"create", "", "serviceaccounts", "token", fullname, ns},
		{"create", "rbac.authorization.k8s.io", "roles", "", "", ns}, {"update", "rbac.authorization.k8s.io", "roles", "", fullname, ns},
		{"create", "rbac.authorization.k8s.io", "rolebindings", "", "", ns},
		{"bind", "rbac.authorization.k8s.io", "roles", "", "", ns}, {"escalate", "rbac.authorization.k8s.io", "roles", "", "", ns},
		{"create", "rbac.authorization.k8s.io", "clusterroles", "", "", ""},
		{"impersonate", "", "serviceaccounts", "", "", ns},
		{"list", "", "nodes", "", "", ""}, {"list", "", "namespaces", "", "", ""},
		{"delete", "", "events", "", "", ns}, {"update", "", "events", "", "x", ns},
	}
	switch method {
	case "delete":
		allowed = append(allowed, attr{"delete", "", "pods", "", "x", ns})
		denied = append(denied, attr{"patch", "apps", "deployments", "", schedDep, ns}, attr{"get", "apps", "replicasets", "", "x", ns})
	case "rollout":
		allowed = append(allowed, attr{"patch", "apps", "deployments", "", schedDep, ns}, attr{"get", "apps", "replicasets", "", "x", ns})
		denied = append(denied, attr{"delete", "", "pods", "", "x", ns}, attr{"list", "apps", "replicasets", "", "", ns},
			attr{"update", "apps", "replicasets", "", "x", ns}, attr{"get", "apps", "replicasets", "", "x", other})
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

// oneOffDryRun runs the NOTES recipe with the control plane's kubectl: a Job from
// the CronJob with WATCHDOG_DRY_RUN=true; then runs that Job's container.
func oneOffDryRun(t *testing.T, ns, kubeconfig string, flags []string) {
	assets, err := testenv.Assets()
	must(t, err)
	kubectl := filepath.Join(assets, "kubectl")
	script := fmt.Sprintf(`set -euo pipefail
%[1]s -n %[2]s create job wd-dry-1 --from=cronjob/%[3]s --dry-run=client -o yaml \
  | %[1]s set env --local -f - WATCHDOG_DRY_RUN=true -o yaml \
  | %[1]s -n %[2]s apply -f -`, kubectl, ns, fullname)
	cmd := exec.Command("bash", "-c", script)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Kubeconfig)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("NOTES dry-run recipe: %v\n%s", err, out)
	}
	ctx, cancel := testenv.Ctx()
	defer cancel()
	job, err := env.Client.BatchV1().Jobs(ns).Get(ctx, "wd-dry-1", metav1.GetOptions{})
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
	cmBefore, _ := stateOf(t, ns)
	wd := &chartWatchdog{t: t, args: c.Args, env: containerEnv(t, ns, c, "wd-dry-1-x"), kubeconfig: kubeconfig}
	r := wd.check(flags...)
	if r.code != 0 || !r.report.DryRun || r.report.StateWritten {
		t.Fatalf("one-off dry run: exit %d dryRun %v stateWritten %v\n%s", r.code, r.report.DryRun, r.report.StateWritten, r.stderr)
	}
	cmAfter, _ := stateOf(t, ns)
	if cmAfter.ResourceVersion != cmBefore.ResourceVersion {
		t.Errorf("a dry run wrote the state ConfigMap")
	}
	must(t, env.Client.BatchV1().Jobs(ns).Delete(ctx, "wd-dry-1", metav1.DeleteOptions{}))
}

func upgradeKeepsState(t *testing.T, rel *releaseT, wd *chartWatchdog, flags []string) {
	ctx, cancel := testenv.Ctx()
	defer cancel()
	before, st := stateOf(t, rel.ns)
	if st == nil || len(st.Restarts) != 1 {
		t.Fatalf("no state to keep: %+v", st)
	}
	rel.upgrade("--set", "restart.maxRestarts=5", "--set", "cronjob.suspend=true", "--set", "image.tag=0.1.1")
	after, _ := stateOf(t, rel.ns)
	if !maps.Equal(before.Data, after.Data) {
		t.Fatalf("helm upgrade changed the state:\nbefore %v\nafter  %v", before.Data, after.Data)
	}
	if after.Labels["app.kubernetes.io/version"] != "0.1.1" || after.Annotations["helm.sh/resource-policy"] != "keep" {
		t.Errorf("upgrade did not manage the ConfigMap's metadata: %v %v", after.Labels, after.Annotations)
	}
	cj, err := env.Client.BatchV1().CronJobs(rel.ns).Get(ctx, fullname, metav1.GetOptions{})
	must(t, err)
	if cj.Spec.Suspend == nil || !*cj.Spec.Suspend {
		t.Errorf("upgrade did not suspend the CronJob")
	}
	// The upgraded configuration and the kept state work together.
	wd = cronJobWatchdog(t, rel.ns, wd.kubeconfig)
	if !contains(wd.env, "WATCHDOG_MAX_RESTARTS=5") {
		t.Errorf("upgraded env lacks WATCHDOG_MAX_RESTARTS=5")
	}
	r := wd.check(flags...)
	r.expect(t, 0, "healthy", "none")
	if _, st := stateOf(t, rel.ns); len(st.Restarts) != 1 {
		t.Errorf("restart history after upgrade: %+v", st.Restarts)
	}
}

func reinstallKeepsState(t *testing.T, rel *releaseT, oldKubeconfig string, flags []string) {
	ctx, cancel := testenv.Ctx()
	defer cancel()
	before, _ := stateOf(t, rel.ns)
	rel.uninstall()

	after, st := stateOf(t, rel.ns)
	if !maps.Equal(before.Data, after.Data) || st == nil || len(st.Restarts) != 1 {
		t.Fatalf("uninstall changed or dropped the state: %v", after.Data)
	}
	for what, err := range map[string]error{
		"Role":           getErr(env.Client.RbacV1().Roles(rel.ns).Get(ctx, fullname, metav1.GetOptions{})),
		"RoleBinding":    getErr(env.Client.RbacV1().RoleBindings(rel.ns).Get(ctx, fullname, metav1.GetOptions{})),
		"ServiceAccount": getErr(env.Client.CoreV1().ServiceAccounts(rel.ns).Get(ctx, fullname, metav1.GetOptions{})),
		"CronJob":        getErr(env.Client.BatchV1().CronJobs(rel.ns).Get(ctx, fullname, metav1.GetOptions{})),
		"Secret":         getErr(env.Client.CoreV1().Secrets(rel.ns).Get(ctx, fullname, metav1.GetOptions{})),
	} {
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s after uninstall: %v, want NotFound", what, err)
		}
	}
	// The old identity can do nothing any more. (The API server caches a successful
	// token authentication for 10 s, so right after uninstall the token may still
	// authenticate; what it may do is gone with the Role and the binding.)
	old := &chartWatchdog{t: t, args: []string{"check", "--output=json"}, env: []string{"WATCHDOG_NAMESPACE=" + rel.ns}, kubeconfig: oldKubeconfig}
	if r := old.check(flags...); r.code != 1 || !(strings.Contains(r.stderr, "forbidden") || strings.Contains(r.stderr, "Unauthorized")) {
		t.Errorf("the uninstalled ServiceAccount's token still works: exit %d\n%s", r.code, r.stderr)
	}

	// Reinstalling the same release adopts the kept ConfigMap and leaves its data.
	mustHelm(t, "install", rel.name, chartDir, "--namespace", rel.ns, "--kubeconfig", env.Kubeconfig, "-f", rel.values)
	again, _ := stateOf(t, rel.ns)
	if !maps.Equal(before.Data, again.Data) {
		t.Fatalf("reinstall changed the state:\nbefore %v\nafter  %v", before.Data, again.Data)
	}
	if again.Annotations["meta.helm.sh/release-name"] != rel.name {
		t.Errorf("reinstalled release does not own the state ConfigMap: %v", again.Annotations)
	}
	kubeconfig, _ := saKubeconfig(t, rel.ns, fullname)
	wd := cronJobWatchdog(t, rel.ns, kubeconfig)
	wd.check(flags...).expect(t, 0, "healthy", "none")
	_, st = stateOf(t, rel.ns)
	if len(st.Restarts) != 1 || st.LastRun == nil {
		t.Errorf("state after reinstall: restarts %+v lastRun %+v", st.Restarts, st.LastRun)
	}

	// A second release in the same namespace would share the state: Helm refuses it.
	out, stderr, err := helm(t, "install", "wd2", chartDir, "--namespace", rel.ns, "--kubeconfig", env.Kubeconfig, "-f", rel.values)
	if err == nil || !strings.Contains(stderr, "ConfigMap") || !strings.Contains(stderr, stateName) {
		t.Errorf("a second release sharing the state ConfigMap: err %v\n%s%s", err, out, stderr)
	}
}

// stateDeleted: without its ConfigMap the identity cannot write state (no create),
// so a run fails loudly, naming the ConfigMap; `helm upgrade` re-creates it.
func stateDeleted(t *testing.T, rel *releaseT, recv *receiver, flags []string) {
	ctx, cancel := testenv.Ctx()
	defer cancel()
	must(t, env.Client.CoreV1().ConfigMaps(rel.ns).Delete(ctx, stateName, metav1.DeleteOptions{}))
	kubeconfig, _ := saKubeconfig(t, rel.ns, fullname)
	wd := cronJobWatchdog(t, rel.ns, kubeconfig)
	r := wd.check(flags...)
	if r.code != 1 || !strings.Contains(r.stderr, stateName) || !strings.Contains(r.stderr, "forbidden") {
		t.Errorf("run without its state ConfigMap: exit %d, want 1 naming %s as forbidden\n%s", r.code, stateName, r.stderr)
	}
	if good, _ := recv.got(); !contains(good, alert.EventWatchdogError) {
		t.Errorf("no watchdog-error alert for the unwritable state; webhook got %v", good)
	}
	rel.upgrade()
	cm, st := stateOf(t, rel.ns)
	if cm.Annotations["helm.sh/resource-policy"] != "keep" || st != nil {
		t.Fatalf("helm upgrade did not re-create an empty state ConfigMap: %v %v", cm.Annotations, cm.Data)
	}
	wd.check(flags...).expect(t, 0, "healthy", "none")
	if _, st := stateOf(t, rel.ns); st == nil || st.LastRun == nil {
		t.Errorf("no state written after the ConfigMap was re-created")
	}
}

func getErr[T any](_ T, err error) error { return err }

// ---- deployment mode ---------------------------------------------------------------

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
	lease, err := env.Client.CoordinationV1().Leases(ns).Get(ctx, "agentenv-scheduler-watchdog", metav1.GetOptions{})
	must(t, err)
	if lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "" {
		t.Fatalf("pre-created Lease already held by %q", *lease.Spec.HolderIdentity)
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
	waitFor(t, "a pass by the leader recorded in the state", func() bool {
		_, st := stateOf(t, ns)
		return st != nil && st.LastRun != nil && st.LastRun.Verdict == "healthy"
	})
	for pod, p := range procs {
		waitFor(t, pod+" /healthz 200", func() bool { return p.get("/healthz") == http.StatusOK })
	}
	if body := procs[leader].body("/metrics"); !strings.Contains(body, "agentenv_watchdog_leader 1") || !strings.Contains(body, "agentenv_watchdog_passes_total") {
		t.Errorf("leader metrics:\n%s", body)
	}
	if body := procs[follower].body("/metrics"); !strings.Contains(body, "agentenv_watchdog_leader 0") {
		t.Errorf("follower metrics:\n%s", body)
	}

	// Memory of a long-running watchdog after several passes, against the chart's
	// request (VmHWM: the peak of the process's own address space since its exec).
	time.Sleep(3 * time.Second)
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

type runProc struct {
	cmd     *exec.Cmd
	started time.Time
	addr    string
	stderr  *syncBuffer
	done    chan struct{}
	code    int
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startRun(t *testing.T, args, environ []string, flags ...string) *runProc {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	addr := ln.Addr().String()
	must(t, ln.Close())
	p := &runProc{addr: addr, stderr: &syncBuffer{}, done: make(chan struct{})}
	full := append(append(append([]string{}, args...), "--metrics-addr", addr), flags...)
	p.cmd = exec.Command(watchdogBin, full...)
	p.cmd.Env = environ
	p.cmd.Stderr = p.stderr
	must(t, p.cmd.Start())
	p.started = time.Now()
	go func() {
		_ = p.cmd.Wait()
		p.code = p.cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	t.Cleanup(func() { p.stop() })
	return p
}

// stop sends SIGTERM to the process this test started and waits for it.
func (p *runProc) stop() int {
	select {
	case <-p.done:
		return p.code
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	return p.code
}

func (p *runProc) age() time.Duration { return time.Since(p.started) }

// peakRSS reads VmHWM of the running process.
func (p *runProc) peakRSS(t *testing.T) int64 {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	must(t, err)
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			must(t, err)
			return kib * 1024
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", p.cmd.Process.Pid)
	return 0
}

func (p *runProc) get(path string) int {
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + p.addr + path)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func (p *runProc) body(path string) string {
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + p.addr + path)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func waitHolder(t *testing.T, ns string, ok func(string) bool) string {
	t.Helper()
	var holder string
	waitFor(t, "the election Lease to be held", func() bool {
		ctx, cancel := testenv.Ctx()
		defer cancel()
		l, err := env.Client.CoordinationV1().Leases(ns).Get(ctx, "agentenv-scheduler-watchdog", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return false
		}
		holder = *l.Spec.HolderIdentity
		return ok(holder)
	})
	return holder
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
