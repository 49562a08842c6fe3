package chart

import (
	"context"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentenv/watchdog/internal/testenv"
	"github.com/agentenv/watchdog/pkg/cli"
	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/doctor"
)

// doctorPod is the `helm test` hook of a render.
func (r *rendered) doctorPod() *corev1.Pod {
	r.t.Helper()
	var pod corev1.Pod
	r.one("Pod", &pod)
	return &pod
}

// workloadContainer is the CronJob's or Deployment's watchdog container.
func (r *rendered) workloadContainer() corev1.Container {
	return r.podSpec().Containers[0]
}

// TestDoctorHookShape: a `helm test` Pod running `watchdog doctor` as the watchdog's
// ServiceAccount, with the workload's settings and pod-level fields.
func TestDoctorHookShape(t *testing.T) {
	const secrets = "alerts: {webhookURL: 'https://h.example.com/x', webhookSecret: k-of-32-bytes-or-more-for-the-test, heartbeatURL: 'https://b.example.com/y'}\n"
	for _, c := range []struct{ name, values string }{
		{"cronjob", secrets},
		{"deployment, election", secrets + "mode: deployment\ndeployment: {replicas: 2}"},
		{"extras", "extraArgs: [--log-level=debug]\nextraEnv: [{name: WATCHDOG_CLUSTER_NAME, value: prod}]\nnodeSelector: {pool: system}"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := render(t, c.values)
			pod := r.doctorPod()
			if pod.Annotations["helm.sh/hook"] != "test" || !strings.Contains(pod.Annotations["helm.sh/hook-delete-policy"], "before-hook-creation") {
				t.Errorf("annotations %v", pod.Annotations)
			}
			if pod.Namespace != renderNamespace || pod.Labels["app.kubernetes.io/component"] != "doctor" {
				t.Errorf("namespace %q labels %v", pod.Namespace, pod.Labels)
			}
			workload := r.podSpec()
			if pod.Spec.ServiceAccountName != fullname || pod.Spec.ServiceAccountName != workload.ServiceAccountName ||
				pod.Spec.AutomountServiceAccountToken == nil || !*pod.Spec.AutomountServiceAccountToken {
				t.Errorf("serviceAccountName %q automount %v", pod.Spec.ServiceAccountName, pod.Spec.AutomountServiceAccountToken)
			}
			if pod.Spec.RestartPolicy != corev1.RestartPolicyNever || !reflect.DeepEqual(pod.Spec.SecurityContext, workload.SecurityContext) ||
				!reflect.DeepEqual(pod.Spec.NodeSelector, workload.NodeSelector) {
				t.Errorf("pod spec differs from the workload's: %+v", pod.Spec)
			}
			got, want := pod.Spec.Containers[0], r.workloadContainer()
			if got.Image != want.Image || !reflect.DeepEqual(got.SecurityContext, want.SecurityContext) || !reflect.DeepEqual(got.Resources, want.Resources) {
				t.Errorf("container image/securityContext/resources differ from the workload's")
			}
			// The workload's arguments after its command, doctor's own before them.
			if got.Args[0] != "doctor" || !slices.Equal(got.Args[2:], want.Args[len(want.Args)-len(got.Args)+2:]) {
				t.Errorf("args %q, workload's %q", got.Args, want.Args)
			}
			// Every setting of the workload's environment that doctor reads, identical
			// (secrets through the same secretKeyRef).
			doctorReads := map[string]bool{"GOMAXPROCS": true, "GOMEMLIMIT": true, "SSL_CERT_DIR": true}
			for _, f := range commandFlags(t, "doctor") {
				doctorReads[cli.EnvName(f)] = true
			}
			have := envOf(got)
			for name, e := range envOf(want) {
				if !doctorReads[name] {
					continue
				}
				if !reflect.DeepEqual(have[name], e) {
					t.Errorf("%s = %+v, the workload's is %+v", name, have[name], e)
				}
			}
			for name := range have {
				if !doctorReads[name] {
					t.Errorf("the hook sets %s, which doctor does not read", name)
				}
			}
		})
	}
}

// TestDoctorFlagsReachable: every doctor flag that is a setting reaches the hook.
func TestDoctorFlagsReachable(t *testing.T) {
	pod := render(t, "alerts: {webhookURL: 'https://h.example.com', webhookSecret: k-of-32-bytes-or-more-for-the-test, slackWebhookURL: 'https://s.example.com', heartbeatURL: 'https://b.example.com'}\nmode: deployment\ndeployment: {replicas: 2}\nprobe: {mode: canary}").doctorPod()
	env := envOf(pod.Spec.Containers[0])
	skip := map[string]bool{"send-test": true} // a hook sends no test alert
	for f := range notFromValues {
		skip[f] = true
	}
	for _, f := range commandFlags(t, "doctor") {
		if _, ok := env[cli.EnvName(f)]; !ok && !skip[f] {
			t.Errorf("--%s does not reach the hook (no %s)", f, cli.EnvName(f))
		}
	}
}

// TestDoctorChecksWhatTheRoleGrants: for each configuration, the calls doctor
// checks with the hook's own settings are exactly the grants of the chart's Role.
func TestDoctorChecksWhatTheRoleGrants(t *testing.T) {
	for _, values := range []string{
		"",
		"restart: {method: rollout}",
		"restart: {maxRestarts: 0}",
		"restart: {method: rollout, maxRestarts: 0}",
		"scheduler: {leaderLease: agentenv-scheduler}",
		"mode: deployment",
		"mode: deployment\ndeployment: {replicas: 3}",
		"mode: deployment\ndeployment: {watchEndpoints: false}",
		"state: {configMapName: wd-state}\nscheduler: {deployment: sched, leaderLease: lead}\nrestart: {method: rollout}",
		"scheduler: {judgePods: selector}",
		"scheduler: {judgePods: selector}\nrestart: {method: rollout}",
	} {
		t.Run(values, func(t *testing.T) {
			r := render(t, values)
			env := envOf(r.doctorPod().Spec.Containers[0])
			get := func(flag string) string { return env[cli.EnvName(flag)].Value }
			maxRestarts, err := strconv.Atoi(get("max-restarts"))
			must(t, err)
			n := doctor.Needs{
				StateConfigMap: get("state-configmap"), Deployment: get("deployment"),
				RestartMethod: get("restart-method"), JudgePods: decide.JudgePods(get("judge-pods")), MaxRestarts: maxRestarts, LeaderLease: get("leader-lease"),
				EvidenceConfigMap: get("evidence-configmap"), EvidenceLogs: get("evidence-logs") == "true",
				Lease: get("lease"), KeySecret: get("key-secret"),
			}
			if get("leader-elect") == "true" {
				n.ElectionLease = get("leader-elect-lease")
			}
			n.WatchEndpoints = get("watch-endpoints") == "true"
			var checked []grant
			for _, a := range n.Required() {
				res := a.Resource
				if a.Subresource != "" {
					res += "/" + a.Subresource
				}
				checked = append(checked, grant{a.Group, res, a.Verb, a.Name})
			}
			sort.Slice(checked, func(i, j int) bool { return checked[i].String() < checked[j].String() })
			if granted := grants(r.role()); !slices.Equal(checked, granted) {
				t.Errorf("doctor checks\n  %v\nthe Role grants\n  %v", checked, granted)
			}
		})
	}
}

// TestDoctorHookInstalled runs the installed hook's container (as `helm test` would,
// but as a process: no kubelet runs here) as the chart's ServiceAccount against a
// healthy simulated scheduler: every check passes with the chart's own rights; a
// wrong setting is a ✗ with its fix, and exit 1.
func TestDoctorHookInstalled(t *testing.T) {
	ctx, cancel := testenv.Ctx()
	defer cancel()
	ns, err := env.CreateNamespace(ctx, "chart-doctor")
	must(t, err)
	installChart(t, ns, release, "")
	sched := layOutScheduler(t, ns, fixture(t, "scheduler-metrics-healthy.txt"))
	kubeconfig, _ := saKubeconfig(t, ns, fullname)

	hooks := parse(t, mustHelm(t, "get", "hooks", release, "--namespace", ns, "--kubeconfig", env.Kubeconfig))
	pod := hooks.doctorPod()
	c := pod.Spec.Containers[0]
	environ := containerEnv(t, ns, c, pod.Name)
	// A default install authenticates its outbox from the start: the key Secret the
	// first real pass creates (docs/alerts.md, "The outbox").
	if !slices.Contains(environ, "WATCHDOG_KEY_SECRET=agentenv-scheduler-watchdog-key") {
		t.Errorf("a default install gives the watchdog no --key-secret (WATCHDOG_KEY_SECRET)")
	}
	run := func(flags ...string) (int, string, string) {
		t.Helper()
		// The only test-only flags: where the simulated scheduler's metrics listen,
		// and the ServiceAccount's token from outside a pod.
		args := append(append(append([]string{}, c.Args...), "--kubeconfig", kubeconfig, "--metrics-port", strconv.Itoa(sched.metrics.Port()), "--scheduler-grpc-port", strconv.Itoa(sched.grpcPort)), flags...)
		return runWatchdog(t, time.Minute, environ, args...)
	}

	// A new RoleBinding reaches the authorizer quickly, but not instantly.
	var code int
	var stdout, stderr string
	defer func() {
		if t.Failed() {
			t.Logf("last doctor run: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
	}()
	waitFor(t, 10*time.Second, "doctor to pass with the chart's rights", func() bool {
		code, stdout, stderr = run()
		return code == 0
	})
	if !strings.Contains(stdout, "✓ can delete pods") || !strings.Contains(stdout, "✓ all ") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	code, stdout, _ = run("--nodes-port", "8001")
	if code != 1 || !strings.Contains(stdout, "✗ nodes Service has EndpointSlices with --nodes-port") || !strings.Contains(stdout, "fix: set --nodes-port (chart: scheduler.nodesPort)") {
		t.Errorf("wrong --nodes-port: exit %d\n%s", code, stdout)
	}
}

// TestHelmTestLogs: `helm test <release> --logs`, the README's own check, exits 0 on
// a passing test and prints the doctor's lines: the hook's Pod must outlive its
// success long enough for helm to read its log. No kubelet runs here, so the test
// plays it: it binds the hook's Pod to a Node whose kubelet endpoint serves the
// log (the API server proxies pods/log there) and marks the Pod Succeeded. A second
// `helm test` replaces the kept Pod (before-hook-creation).
func TestHelmTestLogs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ns, err := env.CreateNamespace(ctx, "chart-helm-test")
	must(t, err)
	installChart(t, ns, release, "")
	const doctorLine = "✓ all 14 checks passed"
	kubelet := testenv.StartKubelet(doctorLine + "\n")
	defer kubelet.Close()
	podName := fullname + "-doctor"
	node := ns + "-node"

	var seen []string // UIDs of the hook Pods already played
	for round := 1; round <= 2; round++ {
		type result struct {
			stdout, stderr string
			err            error
		}
		done := make(chan result, 1)
		go func() {
			stdout, stderr, err := helm(t, "test", release, "--namespace", ns, "--kubeconfig", env.Kubeconfig, "--logs", "--timeout", "60s")
			done <- result{stdout, stderr, err}
		}()
		var pod *corev1.Pod
		waitFor(t, 30*time.Second, "helm test to create the doctor Pod", func() bool {
			p, err := env.Client.CoreV1().Pods(ns).Get(ctx, podName, metav1.GetOptions{})
			if err == nil && p.DeletionTimestamp != nil {
				// before-hook-creation deletes the kept Pod and helm waits until it
				// is gone: the kubelet's part is to confirm the deletion.
				zero := int64(0)
				_ = env.Client.CoreV1().Pods(ns).Delete(ctx, podName, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &p.UID}})
				return false
			}
			if err != nil || slices.Contains(seen, string(p.UID)) {
				return false
			}
			pod = p
			return true
		})
		seen = append(seen, string(pod.UID))
		if round == 1 {
			cleanup, err := kubelet.RegisterNode(ctx, env.Client, node, ns, podName)
			if cleanup != nil {
				defer cleanup()
			}
			must(t, err)
		} else {
			must(t, env.Client.CoreV1().Pods(ns).Bind(ctx, &corev1.Binding{
				ObjectMeta: metav1.ObjectMeta{Name: podName, Namespace: ns},
				Target:     corev1.ObjectReference{Kind: "Node", Name: node},
			}, metav1.CreateOptions{}))
		}
		pod, err = env.Client.CoreV1().Pods(ns).Get(ctx, podName, metav1.GetOptions{})
		must(t, err)
		now := metav1.Now()
		pod.Status.Phase = corev1.PodSucceeded
		pod.Status.StartTime = &now
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name: pod.Spec.Containers[0].Name, Image: pod.Spec.Containers[0].Image,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now}},
		}}
		_, err = env.Client.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		must(t, err)
		var r result
		select {
		case r = <-done:
		case <-time.After(90 * time.Second):
			t.Fatalf("round %d: helm test did not finish", round)
		}
		if r.err != nil || !strings.Contains(r.stdout, doctorLine) {
			t.Fatalf("round %d: helm test --logs on a passing test: %v\nstdout:\n%s\nstderr:\n%s", round, r.err, r.stdout, r.stderr)
		}
	}
}

// TestDoctorTrustsTheCABundle: with caBundle, the hook's doctor (as every run of the
// workload) trusts a receiver whose certificate the private CA signed, and still
// the image's public CAs; without it, the same receiver is a ✗. The hook's process
// runs with the rendered environment, SSL_CERT_DIR pointing where the test put the
// ConfigMap's content (as the kubelet mounts it at the hook's volumeMount).
func TestDoctorTrustsTheCABundle(t *testing.T) {
	ctx, cancel := testenv.Ctx()
	defer cancel()
	ns, err := env.CreateNamespace(ctx, "chart-ca")
	must(t, err)
	installChart(t, ns, release, "caBundle: {configMap: corp-ca}\nalerts: {webhookURL: 'https://hooks.invalid/watchdog', webhookSecret: k-of-32-bytes-or-more-for-the-test}")
	sched := layOutScheduler(t, ns, fixture(t, "scheduler-metrics-healthy.txt"))
	kubeconfig, _ := saKubeconfig(t, ns, fullname)
	var hits atomic.Int32
	receiver := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer receiver.Close()
	receiver.Config.ErrorLog = log.New(io.Discard, "", 0)
	caDir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(caDir, "ca.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: receiver.Certificate().Raw}), 0o644))

	pod := parse(t, mustHelm(t, "get", "hooks", release, "--namespace", ns, "--kubeconfig", env.Kubeconfig)).doctorPod()
	c := pod.Spec.Containers[0]
	mounted := ""
	for _, m := range c.VolumeMounts {
		if m.Name == "ca-bundle" && m.ReadOnly {
			mounted = m.MountPath
		}
	}
	var withCA, withoutCA []string
	for _, e := range containerEnv(t, ns, c, pod.Name) {
		if name, value, _ := strings.Cut(e, "="); name == "SSL_CERT_DIR" {
			if value != mounted || mounted == "" {
				t.Fatalf("SSL_CERT_DIR=%s, the CA bundle is mounted at %q", value, mounted)
			}
			withCA = append(withCA, "SSL_CERT_DIR="+caDir)
			continue
		}
		withCA, withoutCA = append(withCA, e), append(withoutCA, e)
	}
	if len(withCA) == len(withoutCA) {
		t.Fatal("the hook's environment has no SSL_CERT_DIR")
	}
	run := func(environ []string) (int, string) {
		t.Helper()
		args := append(append([]string{}, c.Args...), "--kubeconfig", kubeconfig, "--metrics-port", strconv.Itoa(sched.metrics.Port()), "--scheduler-grpc-port", strconv.Itoa(sched.grpcPort), "--webhook-url", receiver.URL+"/hook")
		code, stdout, _ := runWatchdog(t, time.Minute, environ, args...)
		return code, stdout
	}
	var code int
	var out string
	waitFor(t, 10*time.Second, "doctor to pass with the chart's rights and its CA bundle", func() bool {
		code, out = run(withCA)
		return code == 0
	})
	if !strings.Contains(out, "✓ webhook is reachable") {
		t.Errorf("with the CA bundle:\n%s", out)
	}
	code, out = run(withoutCA)
	if code != 1 || !strings.Contains(out, "✗ webhook is reachable") || !strings.Contains(out, "certificate") {
		t.Errorf("without the CA bundle: exit %d\n%s", code, out)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("doctor sent %d request(s) to the receiver", n)
	}
}
