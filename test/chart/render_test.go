package chart

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/agentenv/watchdog/pkg/cli"
)

// rendered is the output of one `helm template`.
type rendered struct {
	t    testing.TB
	objs []*unstructured.Unstructured
}

// render runs `helm template` with values (YAML, may be empty) and parses every object.
func render(t testing.TB, values string, args ...string) *rendered {
	t.Helper()
	out, err := renderErr(t, values, args...)
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	return parse(t, out)
}

// renderKubeVersion is the cluster version `helm template` renders for: the oldest the
// chart supports (Chart.yaml kubeVersion). Given explicitly because helm's default
// is whatever its build set (1.20 for the helm hack/tools.sh builds, which the chart
// refuses).
const renderKubeVersion = "1.30.0"

func renderErr(t testing.TB, values string, args ...string) (string, error) {
	t.Helper()
	full := []string{"template", release, chartDir, "--namespace", renderNamespace}
	if !slices.Contains(args, "--kube-version") {
		full = append(full, "--kube-version", renderKubeVersion)
	}
	if values != "" {
		full = append(full, "-f", valuesFile(t, values))
	}
	out, stderr, err := helm(t, append(full, args...)...)
	if err != nil {
		return out, fmt.Errorf("%v: %s", err, stderr)
	}
	return out, nil
}

func parse(t testing.TB, manifest string) *rendered {
	t.Helper()
	r := &rendered{t: t}
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	for {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			break
		}
		must(t, err)
		if m == nil {
			continue
		}
		r.objs = append(r.objs, &unstructured.Unstructured{Object: m})
	}
	if len(r.objs) == 0 {
		t.Fatalf("helm template rendered no objects:\n%s", manifest)
	}
	return r
}

func (r *rendered) kinds(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range r.objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// one decodes the single object of kind into into.
func (r *rendered) one(kind string, into any) {
	r.t.Helper()
	objs := r.kinds(kind)
	if len(objs) != 1 {
		r.t.Fatalf("want exactly one %s, rendered %d", kind, len(objs))
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(objs[0].Object, into, true); err != nil {
		r.t.Fatalf("%s does not decode strictly into its API type: %v", kind, err)
	}
}

func (r *rendered) cronJob() *batchv1.CronJob {
	var cj batchv1.CronJob
	r.one("CronJob", &cj)
	return &cj
}

func (r *rendered) deployment() *appsv1.Deployment {
	var d appsv1.Deployment
	r.one("Deployment", &d)
	return &d
}

func (r *rendered) role() *rbacv1.Role {
	var role rbacv1.Role
	r.one("Role", &role)
	return &role
}

// podSpec is the watchdog's pod, whichever the mode.
func (r *rendered) podSpec() *corev1.PodSpec {
	if len(r.kinds("CronJob")) > 0 {
		return &r.cronJob().Spec.JobTemplate.Spec.Template.Spec
	}
	return &r.deployment().Spec.Template.Spec
}

// cronJobOrDeploymentPodAnnotations are the annotations of the CronJob's or Deployment's pods.
func (r *rendered) cronJobOrDeploymentPodAnnotations() map[string]string {
	if len(r.kinds("CronJob")) > 0 {
		return r.cronJob().Spec.JobTemplate.Spec.Template.Annotations
	}
	return r.deployment().Spec.Template.Annotations
}

// podTemplateLabels are the labels of the CronJob's or Deployment's pods.
func (r *rendered) podTemplateLabels() map[string]string {
	if len(r.kinds("CronJob")) > 0 {
		return r.cronJob().Spec.JobTemplate.Spec.Template.Labels
	}
	return r.deployment().Spec.Template.Labels
}

func envOf(c corev1.Container) map[string]corev1.EnvVar {
	m := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		m[e.Name] = e
	}
	return m
}

// grant is one permission: a verb on a resource, on one name or ("") on any.
type grant struct{ group, resource, verb, name string }

func (g grant) String() string {
	n := g.name
	if n == "" {
		n = "*any*"
	}
	return fmt.Sprintf("%s/%s %s %s", g.group, g.resource, g.verb, n)
}

func grants(role *rbacv1.Role) []grant {
	var out []grant
	for _, rule := range role.Rules {
		names := rule.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, g := range rule.APIGroups {
			for _, res := range rule.Resources {
				for _, v := range rule.Verbs {
					for _, n := range names {
						out = append(out, grant{g, res, v, n})
					}
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// baseGrants are what every configuration needs: observe, state, Events, rollout gate,
// the evidence before a restart (its ConfigMap by name, the scheduler's log), and
// the objects the watchdog creates itself: create, then by name.
func baseGrants(configMap, deployment string) []grant {
	return []grant{
		{"", "configmaps", "create", ""},
		{"", "secrets", "create", ""},
		{"", "secrets", "get", "agentenv-scheduler-watchdog-key"},
		{"coordination.k8s.io", "leases", "create", ""},
		{"coordination.k8s.io", "leases", "get", "agentenv-scheduler-watchdog"},
		{"coordination.k8s.io", "leases", "update", "agentenv-scheduler-watchdog"},
		{"", "pods", "list", ""},
		{"discovery.k8s.io", "endpointslices", "list", ""},
		{"", "configmaps", "get", configMap},
		{"", "configmaps", "update", configMap},
		{"", "configmaps", "get", "agentenv-scheduler-watchdog-evidence"},
		{"", "configmaps", "update", "agentenv-scheduler-watchdog-evidence"},
		{"", "pods/log", "get", ""},
		{"", "events", "create", ""},
		{"apps", "deployments", "get", deployment},
		// scheduler.judgePods deployment (the default): the owner chain by UID.
		{"apps", "replicasets", "get", ""},
	}
}

func TestRBACPerConfiguration(t *testing.T) {
	const cm, dep = "agentenv-scheduler-watchdog", "agentenv-scheduler"
	cases := []struct {
		name   string
		values string
		extra  []grant
	}{
		{"delete method (default)", "", []grant{{"", "pods", "delete", ""}}},
		{"rollout method", "restart: {method: rollout}", []grant{{"apps", "deployments", "patch", dep}}},
		{"alert only: no restart rights", "restart: {maxRestarts: 0}", nil},
		// The rollout gate still checks the owner chain, so that a blocked alert names the right reason.
		{"alert only with rollout", "restart: {method: rollout, maxRestarts: 0}", nil},
		{"judging every pod: no ReplicaSets", "scheduler: {judgePods: selector}", []grant{{"", "pods", "delete", ""}}},
		{"judging every pod, rollout method", "scheduler: {judgePods: selector}\nrestart: {method: rollout}", []grant{{"apps", "deployments", "patch", dep}, {"apps", "replicasets", "get", ""}}},
		{"HA scheduler: its leader Lease by name", "scheduler: {leaderLease: agentenv-scheduler}", []grant{
			{"", "pods", "delete", ""}, {"coordination.k8s.io", "leases", "get", "agentenv-scheduler"}}},
		// watch endpointslices: run starts a pass when the nodes change (deployment.watchEndpoints).
		{"deployment mode, one replica: no election", "mode: deployment", []grant{{"", "pods", "delete", ""}, {"discovery.k8s.io", "endpointslices", "watch", ""}}},
		{"deployment mode without the EndpointSlice watch", "mode: deployment\ndeployment: {watchEndpoints: false}", []grant{{"", "pods", "delete", ""}}},
		{"deployment mode, 3 replicas", "mode: deployment\ndeployment: {replicas: 3}", []grant{
			{"", "pods", "delete", ""}, {"discovery.k8s.io", "endpointslices", "watch", ""}}},
		{"no evidence logs", "evidence: {logs: false}", []grant{{"", "pods", "delete", ""}}},
		{"renamed objects", "state: {configMapName: wd-state}\nscheduler: {deployment: sched}\nrestart: {method: rollout}",
			append(baseGrants("wd-state", "sched")[:0:0], grant{"apps", "deployments", "patch", "sched"})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := render(t, c.values)
			want := baseGrants(cm, dep)
			if strings.Contains(c.name, "renamed") {
				want = baseGrants("wd-state", "sched")
			}
			if strings.Contains(c.name, "no evidence logs") {
				want = slices.DeleteFunc(want, func(g grant) bool { return g.resource == "pods/log" })
			}
			if strings.Contains(c.values, "judgePods: selector") {
				want = slices.DeleteFunc(want, func(g grant) bool { return g.resource == "replicasets" })
			}
			want = append(want, c.extra...)
			sort.Slice(want, func(i, j int) bool { return want[i].String() < want[j].String() })
			got := grants(r.role())
			if !slices.Equal(got, want) {
				t.Errorf("Role grants\n  %v\nwant exactly\n  %v", got, want)
			}
			assertNoBroadRBAC(t, r)
		})
	}
}

// assertNoBroadRBAC: never a ClusterRole or ClusterRoleBinding, no Secret but the key's,
// never a wildcard, and the binding binds the Role to the chart's ServiceAccount.
func assertNoBroadRBAC(t *testing.T, r *rendered) {
	t.Helper()
	for _, kind := range []string{"ClusterRole", "ClusterRoleBinding"} {
		if n := len(r.kinds(kind)); n != 0 {
			t.Errorf("rendered %d %s: the watchdog must be namespaced", n, kind)
		}
	}
	for _, role := range r.kinds("Role") {
		var rr rbacv1.Role
		must(t, runtime.DefaultUnstructuredConverter.FromUnstructured(role.Object, &rr))
		for _, g := range grants(&rr) {
			// Of Secrets, only the key's: create (no name possible) and get by name.
			key := g.resource == "secrets" && (g.verb == "create" || g.verb == "get" && g.name == "agentenv-scheduler-watchdog-key")
			if (g.resource == "secrets" || strings.HasPrefix(g.resource, "secrets/")) && !key {
				t.Errorf("Role grants %s: no Secret but the key's", g)
			}
			// The one subresource: get pods/log, the evidence before a restart
			// (evidence.logs), read-only.
			logs := g.resource == "pods/log" && g.verb == "get"
			if g.group == "*" || g.resource == "*" || g.verb == "*" || (strings.Contains(g.resource, "/") && !logs) {
				t.Errorf("Role grants %s: no wildcards, no subresources but get pods/log", g)
			}
			// create cannot be narrowed by name: the guard policy narrows the watchdog's
			// own objects' (configmaps, secrets, leases), the canary's the admission policy.
			unnamed := (g.verb == "create" && slices.Contains([]string{"events", "configmaps", "secrets", "leases", "endpointslices"}, g.resource)) ||
				(g.resource == "pods" && g.verb == "delete")
			if slices.Contains([]string{"create", "patch", "update", "delete", "deletecollection"}, g.verb) && g.name == "" && !unnamed {
				t.Errorf("Role grants %s: writes must be by resource name (only creates and pod delete cannot be)", g)
			}
		}
	}
	var rb rbacv1.RoleBinding
	r.one("RoleBinding", &rb)
	if rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != r.role().Name {
		t.Errorf("RoleBinding refers to %s %s", rb.RoleRef.Kind, rb.RoleRef.Name)
	}
	if len(rb.Subjects) != 1 || rb.Subjects[0].Kind != "ServiceAccount" || rb.Subjects[0].Name != r.podSpec().ServiceAccountName {
		t.Errorf("RoleBinding subjects %+v, want the pod's ServiceAccount %q only", rb.Subjects, r.podSpec().ServiceAccountName)
	}
}

func TestRBACInSchedulerNamespace(t *testing.T) {
	r := render(t, "scheduler: {namespace: agentenv-prod}")
	for _, kind := range []string{"Role", "RoleBinding", "ConfigMap"} {
		for _, o := range r.kinds(kind) {
			if o.GetNamespace() != "agentenv-prod" {
				t.Errorf("%s %s in namespace %q, want the scheduler's agentenv-prod", kind, o.GetName(), o.GetNamespace())
			}
		}
	}
	for _, kind := range []string{"CronJob", "ServiceAccount"} {
		for _, o := range r.kinds(kind) {
			if o.GetNamespace() != renderNamespace {
				t.Errorf("%s in namespace %q, want the release's", kind, o.GetNamespace())
			}
		}
	}
	var rb rbacv1.RoleBinding
	r.one("RoleBinding", &rb)
	if rb.Subjects[0].Namespace != renderNamespace {
		t.Errorf("binding subject namespace %q, want %q", rb.Subjects[0].Namespace, renderNamespace)
	}
	if e := envOf(r.cronJob().Spec.JobTemplate.Spec.Template.Spec.Containers[0])["WATCHDOG_NAMESPACE"]; e.Value != "agentenv-prod" {
		t.Errorf("WATCHDOG_NAMESPACE=%q", e.Value)
	}
}

func TestCronJobShape(t *testing.T) {
	cj := render(t, "").cronJob()
	s := cj.Spec
	if s.Schedule != "*/5 * * * *" || s.ConcurrencyPolicy != batchv1.ForbidConcurrent {
		t.Errorf("schedule %q concurrency %q", s.Schedule, s.ConcurrencyPolicy)
	}
	if s.StartingDeadlineSeconds == nil || *s.StartingDeadlineSeconds <= 0 || s.Suspend == nil || *s.Suspend || s.TimeZone != nil {
		t.Errorf("startingDeadlineSeconds %v suspend %v timeZone %v", s.StartingDeadlineSeconds, s.Suspend, s.TimeZone)
	}
	if s.SuccessfulJobsHistoryLimit == nil || s.FailedJobsHistoryLimit == nil || *s.FailedJobsHistoryLimit < 1 {
		t.Errorf("history limits %v %v", s.SuccessfulJobsHistoryLimit, s.FailedJobsHistoryLimit)
	}
	job := s.JobTemplate.Spec
	if job.BackoffLimit == nil || *job.BackoffLimit != 0 {
		t.Errorf("backoffLimit %v, want 0", job.BackoffLimit)
	}
	c := job.Template.Spec.Containers[0]
	timeout, err := time.ParseDuration(envOf(c)["WATCHDOG_TIMEOUT"].Value)
	must(t, err)
	deadline := time.Duration(*job.ActiveDeadlineSeconds) * time.Second
	if deadline <= timeout || deadline >= 5*time.Minute {
		t.Errorf("activeDeadlineSeconds %s must be longer than --timeout %s and shorter than the 5 min interval", deadline, timeout)
	}
	// The watchdog is told which run it is and the Job's deadline, so that a pod
	// that starts late ends its run before it.
	if e := envOf(c)["WATCHDOG_JOB_ACTIVE_DEADLINE"]; e.Value != fmt.Sprintf("%ds", *job.ActiveDeadlineSeconds) {
		t.Errorf("WATCHDOG_JOB_ACTIVE_DEADLINE=%q, want the Job's activeDeadlineSeconds %d", e.Value, *job.ActiveDeadlineSeconds)
	}
	if e := envOf(c)["WATCHDOG_JOB_NAME"]; e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.labels['batch.kubernetes.io/job-name']" {
		t.Errorf("WATCHDOG_JOB_NAME %+v, want the pod's batch.kubernetes.io/job-name label", e.ValueFrom)
	}
	if e := envOf(render(t, "cronjob: {activeDeadlineSeconds: 250}").cronJob().Spec.JobTemplate.Spec.Template.Spec.Containers[0])["WATCHDOG_JOB_ACTIVE_DEADLINE"]; e.Value != "250s" {
		t.Errorf("cronjob.activeDeadlineSeconds 250 reaches the watchdog as %q", e.Value)
	}
	// With the defaults a pod started 120 s late still has time for a
	// confirmation (pkg/check TestLateJobPodFinishesBeforeTheJobDeadline).
	if left := deadline - 120*time.Second - cli.JobKillMargin; left < 2*time.Minute {
		t.Errorf("a pod started 120 s late has %s before the Job's deadline less the watchdog's margin", left)
	}
	confirm, err := time.ParseDuration(envOf(c)["WATCHDOG_CONFIRM_WINDOW"].Value)
	must(t, err)
	if confirm >= timeout {
		t.Errorf("--confirm-window %s does not fit --timeout %s", confirm, timeout)
	}
	if job.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("restartPolicy %q", job.Template.Spec.RestartPolicy)
	}
	if !slices.Equal(c.Args, []string{"check", "--output=json"}) {
		t.Errorf("args %q", c.Args)
	}
	// A check starts on one P (docs/performance.md); the long-running mode keeps the default.
	if e := envOf(c)["GOMAXPROCS"]; e.Value != "1" {
		t.Errorf("cronjob GOMAXPROCS %q, want 1", e.Value)
	}
	if e, ok := envOf(render(t, "mode: deployment").deployment().Spec.Template.Spec.Containers[0])["GOMAXPROCS"]; ok {
		t.Errorf("deployment mode sets GOMAXPROCS=%q", e.Value)
	}

	// suspend and timeZone reach the CronJob.
	s = render(t, "cronjob: {suspend: true, timeZone: Europe/Berlin}").cronJob().Spec
	if !*s.Suspend || s.TimeZone == nil || *s.TimeZone != "Europe/Berlin" {
		t.Errorf("suspend %v timeZone %v", *s.Suspend, s.TimeZone)
	}
	// No Deployment, Service or Lease in cronjob mode.
	r := render(t, "")
	for _, kind := range []string{"Deployment", "Service", "Lease"} {
		if n := len(r.kinds(kind)); n != 0 {
			t.Errorf("cronjob mode rendered %d %s", n, kind)
		}
	}
}

func TestDeploymentMode(t *testing.T) {
	r := render(t, "mode: deployment\ndeployment: {replicas: 2, service: {enabled: true}}")
	if n := len(r.kinds("CronJob")); n != 0 {
		t.Errorf("deployment mode rendered %d CronJob", n)
	}
	d := r.deployment()
	if *d.Spec.Replicas != 2 || d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
		t.Errorf("replicas %d strategy %s", *d.Spec.Replicas, d.Spec.Strategy.Type)
	}
	c := d.Spec.Template.Spec.Containers[0]
	env := envOf(c)
	if !slices.Equal(c.Args, []string{"run"}) || env["WATCHDOG_INTERVAL"].Value != "30s" || env["WATCHDOG_METRICS_ADDR"].Value != ":9102" {
		t.Errorf("args %q interval %q metrics-addr %q", c.Args, env["WATCHDOG_INTERVAL"].Value, env["WATCHDOG_METRICS_ADDR"].Value)
	}
	if env["WATCHDOG_LEADER_ELECT"].Value != "true" || env["WATCHDOG_LEADER_ELECT_LEASE"].Value != "agentenv-scheduler-watchdog" {
		t.Errorf("replicas 2 must elect a leader: %+v", env["WATCHDOG_LEADER_ELECT"])
	}
	if id := env["WATCHDOG_LEADER_ELECT_IDENTITY"].ValueFrom; id == nil || id.FieldRef == nil || id.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("election identity must be the pod name: %+v", id)
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != "metrics" || c.Ports[0].ContainerPort != 9102 {
		t.Errorf("ports %+v", c.Ports)
	}
	for name, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Port.String() != "metrics" {
			t.Errorf("%s probe %+v, want GET /healthz on the metrics port", name, p)
		}
	}
	if n := len(r.kinds("Lease")); n != 0 {
		t.Errorf("rendered %d Lease: the watchdog creates its own", n)
	}
	var svc corev1.Service
	r.one("Service", &svc)
	if svc.Spec.Ports[0].Port != 9102 {
		t.Errorf("metrics Service port %d", svc.Spec.Ports[0].Port)
	}

	// One replica: no election, no Lease, and never two watchdogs during a rollout.
	r = render(t, "mode: deployment")
	d = r.deployment()
	if e := envOf(d.Spec.Template.Spec.Containers[0])["WATCHDOG_LEADER_ELECT"]; e.Value != "false" {
		t.Errorf("one replica: WATCHDOG_LEADER_ELECT=%q", e.Value)
	}
	if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("one replica without election must use Recreate, got %s", d.Spec.Strategy.Type)
	}
	if n := len(r.kinds("Lease")); n != 0 {
		t.Errorf("one replica rendered %d Lease", n)
	}
}

func TestSecurityContextAndResources(t *testing.T) {
	for _, mode := range []string{"cronjob", "deployment"} {
		t.Run(mode, func(t *testing.T) {
			pod := render(t, "mode: "+mode).podSpec()
			psc := pod.SecurityContext
			if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 65532 ||
				psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("pod securityContext %+v", psc)
			}
			if pod.AutomountServiceAccountToken == nil || !*pod.AutomountServiceAccountToken || pod.ServiceAccountName != fullname {
				t.Errorf("pod must mount its own ServiceAccount's token: %v %q", pod.AutomountServiceAccountToken, pod.ServiceAccountName)
			}
			if len(pod.Containers) != 1 {
				t.Fatalf("%d containers", len(pod.Containers))
			}
			c := pod.Containers[0]
			sc := c.SecurityContext
			if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != 65532 ||
				sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
				sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
				sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 ||
				sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("container securityContext %+v", sc)
			}
			req, lim := c.Resources.Requests, c.Resources.Limits
			if req.Cpu().IsZero() || req.Memory().IsZero() || lim.Memory().IsZero() {
				t.Errorf("resources %+v: requests and a memory limit are required", c.Resources)
			}
			// Measured peak RSS is ~17 MiB: the limit must leave headroom, the request cover it.
			if lim.Memory().Value() < 48<<20 || req.Memory().Value() < 17<<20 || req.Memory().Cmp(*lim.Memory()) > 0 {
				t.Errorf("memory request %s limit %s do not fit a ~17 MiB peak", req.Memory(), lim.Memory())
			}
			goMemLimitUnder(t, c)
		})
	}
	var sa corev1.ServiceAccount
	render(t, "").one("ServiceAccount", &sa)
	if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
		t.Errorf("ServiceAccount must not automount its token into other pods")
	}
}

func TestStandardLabels(t *testing.T) {
	r := render(t, "mode: deployment\ndeployment: {replicas: 2, service: {enabled: true}}\nalerts: {webhookURL: 'https://hooks.example.com/x'}")
	r.objs = append(r.objs, render(t, "").objs...)
	for _, o := range r.objs {
		l := o.GetLabels()
		for _, k := range []string{"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/version", "app.kubernetes.io/managed-by", "helm.sh/chart"} {
			if l[k] == "" {
				t.Errorf("%s %s lacks label %s", o.GetKind(), o.GetName(), k)
			}
		}
		if l["app.kubernetes.io/instance"] != release || l["app.kubernetes.io/managed-by"] != "Helm" {
			t.Errorf("%s %s labels %v", o.GetKind(), o.GetName(), l)
		}
	}
}

// TestChartRendersNoneOfTheWatchdogsObjects: the state and evidence
// ConfigMaps, the key Secret, the Lease and the canary are the watchdog's: it
// creates them at its first non-dry pass, and helm never writes them (so helm
// upgrade never resets them, and the guard policy needs no exception for helm).
func TestChartRendersNoneOfTheWatchdogsObjects(t *testing.T) {
	for _, values := range []string{"", "mode: deployment\ndeployment: {replicas: 3}", "evidence: {keepAfterUninstall: true}"} {
		r := render(t, values)
		for _, kind := range []string{"ConfigMap", "Lease", "EndpointSlice"} {
			for _, o := range r.kinds(kind) {
				if !strings.Contains(o.GetName(), "dashboard") {
					t.Errorf("values %q rendered %s %s", values, kind, o.GetName())
				}
			}
		}
		for _, o := range r.kinds("Secret") {
			if o.GetName() == "agentenv-scheduler-watchdog-key" {
				t.Errorf("values %q rendered the key Secret", values)
			}
		}
	}
}

// TestSecretsOnlyThroughSecret: alert URLs and the HMAC key live in a Secret and
// reach the container through secretKeyRef, never in args or plain env.
func TestSecretsOnlyThroughSecret(t *testing.T) {
	const values = `alerts:
  slackWebhookURL: https://hooks.slack.com/services/T0/B0/SLACKTOKEN
  webhookURL: https://alerts.example.com/hook?token=WEBHOOKTOKEN
  webhookSecret: HMACKEY-of-32-bytes-or-more-for-tests
  heartbeatURL: https://hc.example.com/ping/HEARTBEATTOKEN
`
	for _, mode := range []string{"cronjob", "deployment"} {
		t.Run(mode, func(t *testing.T) {
			r := render(t, values+"mode: "+mode)
			var secret corev1.Secret
			r.one("Secret", &secret)
			want := map[string]string{
				"slack-webhook-url": "https://hooks.slack.com/services/T0/B0/SLACKTOKEN",
				"webhook-url":       "https://alerts.example.com/hook?token=WEBHOOKTOKEN",
				"webhook-secret":    "HMACKEY-of-32-bytes-or-more-for-tests",
				"heartbeat-url":     "https://hc.example.com/ping/HEARTBEATTOKEN",
			}
			for k, v := range want {
				if secret.StringData[k] != v {
					t.Errorf("Secret key %s = %q, want %q", k, secret.StringData[k], v)
				}
			}
			pod := r.podSpec()
			c := pod.Containers[0]
			env := envOf(c)
			for flag, key := range map[string]string{"SLACK_WEBHOOK_URL": "slack-webhook-url", "WEBHOOK_URL": "webhook-url", "WEBHOOK_SECRET": "webhook-secret", "HEARTBEAT_URL": "heartbeat-url"} {
				e := env["WATCHDOG_"+flag]
				if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != secret.Name || e.ValueFrom.SecretKeyRef.Key != key {
					t.Errorf("WATCHDOG_%s = %+v, want secretKeyRef %s/%s", flag, e, secret.Name, key)
				}
			}
			// Nothing but the Secret carries a secret.
			for _, o := range r.objs {
				if o.GetKind() == "Secret" {
					continue
				}
				raw, err := o.MarshalJSON()
				must(t, err)
				for _, tok := range []string{"SLACKTOKEN", "WEBHOOKTOKEN", "HMACKEY-of-32-bytes-or-more-for-tests", "HEARTBEATTOKEN"} {
					if strings.Contains(string(raw), tok) {
						t.Errorf("%s %s carries the secret %s", o.GetKind(), o.GetName(), tok)
					}
				}
			}
			// Nothing generated at render time: no key (the watchdog creates its own
			// Secret), and no checksum/secret without a key to salt it with
			// (TestChartSecretChecksumSalted has the installed case).
			if k, ok := secret.StringData["outbox-key"]; ok {
				t.Errorf("Secret key outbox-key %q rendered by helm template", k)
			}
			ann := r.cronJobOrDeploymentPodAnnotations()
			if ann["checksum/secret"] != "" {
				t.Errorf("%s pod template has an unsalted checksum/secret: %v", mode, ann)
			}
		})
	}

	// existingSecret: no Secret rendered, env refers to the named Secret with custom keys.
	r := render(t, "alerts: {existingSecret: my-alerts, existingSecretKeys: {slackWebhookURL: slack, webhookURL: hook, webhookSecret: hmac, heartbeatURL: hb}}")
	if n := len(r.kinds("Secret")); n != 0 {
		t.Errorf("existingSecret rendered %d Secret", n)
	}
	e := envOf(r.podSpec().Containers[0])["WATCHDOG_WEBHOOK_SECRET"]
	if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef.Name != "my-alerts" || e.ValueFrom.SecretKeyRef.Key != "hmac" || e.ValueFrom.SecretKeyRef.Optional == nil || !*e.ValueFrom.SecretKeyRef.Optional {
		t.Errorf("existingSecret env %+v", e)
	}
	// The defaults, no sink at all: no Secret; the watchdog reads the key Secret it
	// creates (WATCHDOG_KEY_SECRET), seeded from a 0.1.0 release's outbox-key
	// (WATCHDOG_OUTBOX_KEY, optional) when there is one.
	for _, mode := range []string{"cronjob", "deployment"} {
		r = render(t, "mode: "+mode)
		if n := len(r.kinds("Secret")); n != 0 {
			t.Errorf("%s, no sinks: %d Secrets rendered", mode, n)
		}
		env := envOf(r.podSpec().Containers[0])
		e := env["WATCHDOG_OUTBOX_KEY"]
		if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != fullname || e.ValueFrom.SecretKeyRef.Key != "outbox-key" || !*e.ValueFrom.SecretKeyRef.Optional {
			t.Errorf("%s, no sinks: WATCHDOG_OUTBOX_KEY = %+v, want optional secretKeyRef %s/outbox-key", mode, e, fullname)
		}
		if v := env["WATCHDOG_KEY_SECRET"].Value; v != "agentenv-scheduler-watchdog-key" {
			t.Errorf("%s: WATCHDOG_KEY_SECRET = %q", mode, v)
		}
	}
}

// secretFlags lists the flags of check, run and doctor whose help says they are
// secret: the binary is the one list, so a new secret flag the schema does not
// guard fails TestSecretFlagsRefusedInExtras.
func secretFlags(t *testing.T) []string {
	t.Helper()
	root := cli.NewRootCommand(io.Discard, io.Discard)
	seen := map[string]bool{}
	for _, c := range root.Commands() {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if strings.Contains(f.Usage, "(secret") {
				seen[f.Name] = true
			}
		})
	}
	if len(seen) < 7 {
		t.Fatalf("only %d secret flags found: %v", len(seen), seen)
	}
	return slices.Sorted(maps.Keys(seen))
}

// TestSecretFlagsRefusedInExtras: extraArgs and extraEnv cannot carry a secret in
// the clear (anyone who can read the pod reads its arguments and plain env): no
// secret flag as an argument or a plain variable, and no URL with credentials in it.
func TestSecretFlagsRefusedInExtras(t *testing.T) {
	for _, flag := range secretFlags(t) {
		for _, values := range []string{
			fmt.Sprintf("extraArgs: ['--%s=https://x.example.com']", flag),
			fmt.Sprintf("extraArgs: ['--%s', 'https://x.example.com']", flag),
			fmt.Sprintf("extraEnv: [{name: %s, value: 'https://x.example.com'}]", cli.EnvName(flag)),
		} {
			if out, err := renderErr(t, values); err == nil || !strings.Contains(err.Error(), "extra") {
				t.Errorf("--%s: the chart accepted %s (err %v)\n%.300s", flag, values, err, out)
			}
		}
		// From a Secret it is fine.
		render(t, fmt.Sprintf("extraEnv: [{name: %s, valueFrom: {secretKeyRef: {name: s, key: k}}}]", cli.EnvName(flag)))
	}
	for _, values := range []string{
		"extraArgs: ['--runbook-url=https://user:pass@wiki.example.com/wd']",
		"extraArgs: ['--alertmanager-generator-url', 'https://user:pass@grafana.example.com']",
		"extraEnv: [{name: WATCHDOG_RUNBOOK_URL, value: 'https://user:pass@wiki.example.com/wd'}]",
		"extraEnv: [{name: HTTPS_PROXY, value: 'http://user:pass@proxy.example.com:3128'}]",
	} {
		if out, err := renderErr(t, values); err == nil || !strings.Contains(err.Error(), "extra") {
			t.Errorf("the chart accepted credentials in a URL: %s (err %v)\n%.300s", values, err, out)
		}
	}
	// A URL without credentials, or with an @ in its path, is not a secret.
	render(t, "extraArgs: ['--runbook-url=https://wiki.example.com/wd/@team']\nextraEnv: [{name: HTTPS_PROXY, value: 'http://proxy.example.com:3128'}]")
}

// commandFlags lists the flags of one watchdog subcommand.
func commandFlags(t *testing.T, name string) []string {
	t.Helper()
	root := cli.NewRootCommand(io.Discard, io.Discard)
	var cmd *cobra.Command
	for _, c := range root.Commands() {
		if c.Name() == name {
			cmd = c
		}
	}
	if cmd == nil {
		t.Fatalf("no %q command", name)
	}
	var out []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) { out = append(out, f.Name) })
	return out
}

// notFromValues are flags that make no sense in a pod: it always uses its in-cluster
// identity (and --output is an argument of check, set from run.output).
var notFromValues = map[string]string{
	"help":       "not a setting",
	"kubeconfig": "in-cluster configuration: the pod's ServiceAccount",
	"context":    "in-cluster configuration: the pod's ServiceAccount",
	"output":     "an argument of check (run.output)",
	// test/chart TestValuesContract adds it to the rendered arguments.
	"validate-only": "a one-off check of the configuration, not a setting",
	"scrape-via":    "in a pod, auto scrapes the pod IPs directly; the Role grants no get pods/proxy",
}

func init() {
	// kubectl's connection flags (--as, --token, --server, ...): in a pod the
	// identity is the pod's ServiceAccount.
	for _, f := range cli.KubeConnectionFlags() {
		if _, ok := notFromValues[f]; !ok {
			notFromValues[f] = "in-cluster configuration: the pod's ServiceAccount"
		}
	}
}

// TestEveryFlagReachable: every flag of check and run reaches the container, as a
// WATCHDOG_* variable (so `kubectl set env` can override it on a one-off job).
func TestEveryFlagReachable(t *testing.T) {
	secrets := "alerts: {webhookURL: 'https://h.example.com', webhookSecret: k-of-32-bytes-or-more-for-the-test, slackWebhookURL: 'https://s.example.com', heartbeatURL: 'https://b.example.com'}\n"
	for _, c := range []struct{ mode, command string }{{"cronjob", "check"}, {"deployment", "run"}} {
		t.Run(c.command, func(t *testing.T) {
			values := secrets + "mode: " + c.mode + "\ndeployment: {replicas: 2}\nprobe: {mode: canary}"
			if c.mode == "cronjob" {
				values += "\nmonitoring: {pushgateway: {url: 'http://pushgateway.monitoring:9091'}}"
			}
			pod := render(t, values).podSpec()
			cont := pod.Containers[0]
			env := envOf(cont)
			flags := commandFlags(t, c.command)
			if len(flags) < 30 {
				t.Fatalf("only %d flags found on %s", len(flags), c.command)
			}
			for _, f := range flags {
				if _, skip := notFromValues[f]; skip {
					continue
				}
				if _, ok := env[cli.EnvName(f)]; !ok {
					t.Errorf("--%s is not reachable from values (no %s in the %s container)", f, cli.EnvName(f), c.mode)
				}
			}
			// And nothing the binary would not read.
			known := map[string]bool{"GOMEMLIMIT": true, "GOMAXPROCS": c.command == "check"} // read by the Go runtime
			for _, f := range flags {
				known[cli.EnvName(f)] = true
			}
			for name := range env {
				if !known[name] {
					t.Errorf("container sets %s, which %s does not read", name, c.command)
				}
			}
		})
	}
}

// TestValuesReachFlags: each value lands in the variable of its flag.
func TestValuesReachFlags(t *testing.T) {
	const values = `
scheduler: {namespace: sched-ns, selector: "app=s,tier=x", container: sch, deployment: sch-dep, metricsPort: 9999, metricsPath: /m,
  scrapeTimeout: 3s, metricsMaxBytes: 2048, nodesService: nodes, nodesPort: 8111, leaderLease: sch-leader, maxPods: 4}
decision: {startupGrace: 1m, wedgedFor: 3m, confirmWindow: 60s, sampleInterval: 10s, maxWatchAge: 5m, restartOnDegraded: true}
restart: {method: rollout, maxRestarts: 7, window: 2h}
dryRun: true
run: {timeout: 150s, apiTimeout: 7s, logLevel: debug, logFormat: console, output: text}
alerts: {clusterName: prod-1, runbookURL: 'https://runbooks.example.com/wd', realertInterval: 30m, blindAfter: 5, timeout: 4s}
state: {configMapName: wd-state}
`
	c := render(t, values).cronJob().Spec.JobTemplate.Spec.Template.Spec.Containers[0]
	env := envOf(c)
	want := map[string]string{
		"NAMESPACE": "sched-ns", "SCHEDULER_SELECTOR": "app=s,tier=x", "SCHEDULER_CONTAINER": "sch", "DEPLOYMENT": "sch-dep",
		"METRICS_PORT": "9999", "METRICS_PATH": "/m", "SCRAPE_TIMEOUT": "3s", "METRICS_MAX_BYTES": "2048", "NODES_SERVICE": "nodes",
		"NODES_PORT": "8111", "LEADER_LEASE": "sch-leader", "MAX_PODS": "4", "STARTUP_GRACE": "1m", "WEDGED_FOR": "3m", "CONFIRM_WINDOW": "60s",
		"SAMPLE_INTERVAL": "10s", "MAX_WATCH_AGE": "5m", "RESTART_ON_DEGRADED": "true", "RESTART_METHOD": "rollout",
		"MAX_RESTARTS": "7", "RESTART_WINDOW": "2h", "DRY_RUN": "true", "TIMEOUT": "150s", "API_TIMEOUT": "7s",
		"LOG_LEVEL": "debug", "LOG_FORMAT": "console", "CLUSTER_NAME": "prod-1", "RUNBOOK_URL": "https://runbooks.example.com/wd",
		"REALERT_INTERVAL": "30m", "BLIND_AFTER": "5", "ALERT_TIMEOUT": "4s", "STATE_CONFIGMAP": "wd-state",
	}
	for k, v := range want {
		if got := env["WATCHDOG_"+k].Value; got != v {
			t.Errorf("WATCHDOG_%s = %q, want %q", k, got, v)
		}
	}
	if !slices.Contains(c.Args, "--output=text") {
		t.Errorf("args %q lack --output=text", c.Args)
	}
	// Large numbers stay integers (YAML numbers reach templates as floats).
	c = render(t, "scheduler: {metricsMaxBytes: 134217728}").cronJob().Spec.JobTemplate.Spec.Template.Spec.Containers[0]
	if got := envOf(c)["WATCHDOG_METRICS_MAX_BYTES"].Value; got != "134217728" {
		t.Errorf("WATCHDOG_METRICS_MAX_BYTES=%q", got)
	}
}

// TestSchemaRejectsNonsense: each bad values file makes `helm template` fail, and the
// message names what is wrong.
func TestSchemaRejectsNonsense(t *testing.T) {
	cases := []struct{ name, values, want string }{
		{"duration in words", "decision: {wedgedFor: 5 minutes}", "wedgedFor"},
		{"duration without unit", "run: {timeout: 180}", "timeout"},
		{"negative duration", "decision: {startupGrace: -1m}", "startupGrace"},
		{"zero where positive needed", "decision: {wedgedFor: 0s}", "wedgedFor"},
		{"zero restart window", "restart: {window: '0'}", "window"},
		{"unknown restart method", "restart: {method: kill}", "method"},
		{"restartMethod typo at the top", "restartMethod: rollout", "restartMethod"},
		{"mode not cronjob or deployment", "mode: daemonset", "mode"},
		{"negative max restarts", "restart: {maxRestarts: -1}", "maxRestarts"},
		{"fractional max restarts", "restart: {maxRestarts: 1.5}", "maxRestarts"},
		{"negative replicas", "deployment: {replicas: -2}", "replicas"},
		{"metrics port out of range", "scheduler: {metricsPort: 70000}", "metricsPort"},
		{"nodes port zero", "scheduler: {nodesPort: 0}", "nodesPort"},
		{"metrics path without slash", "scheduler: {metricsPath: metrics}", "metricsPath"},
		{"tiny metrics page limit", "scheduler: {metricsMaxBytes: 10}", "metricsMaxBytes"},
		{"plain http webhook", "alerts: {webhookURL: 'http://alerts.example.com/hook'}", "webhookURL"},
		{"plain http slack", "alerts: {slackWebhookURL: 'http://hooks.slack.com/x'}", "slackWebhookURL"},
		{"not a URL heartbeat", "alerts: {heartbeatURL: hc.example.com/ping}", "heartbeatURL"},
		{"blind after zero", "alerts: {blindAfter: 0}", "blindAfter"},
		{"unknown log level", "run: {logLevel: verbose}", "logLevel"},
		{"unknown output", "run: {output: yaml}", "output"},
		{"concurrent runs", "cronjob: {concurrencyPolicy: Allow}", "concurrencyPolicy"},
		{"negative history", "cronjob: {failedJobsHistoryLimit: -1}", "failedJobsHistoryLimit"},
		{"retrying jobs forever", "cronjob: {backoffLimit: 100}", "backoffLimit"},
		{"schedule with 3 fields", "cronjob: {schedule: '*/5 * *'}", "schedule"},
		{"bad namespace", "scheduler: {namespace: Agentenv_System}", "namespace"},
		{"bad ConfigMap name", "state: {configMapName: 'State Map'}", "configMapName"},
		{"root user", "podSecurityContext: {runAsNonRoot: false, runAsUser: 0}", "runAsNonRoot"},
		{"writable root filesystem", "securityContext: {readOnlyRootFilesystem: false}", "readOnlyRootFilesystem"},
		{"privilege escalation", "securityContext: {allowPrivilegeEscalation: true}", "allowPrivilegeEscalation"},
		{"added capability", "securityContext: {capabilities: {drop: [ALL], add: [NET_ADMIN]}}", "add"},
		{"unconfined seccomp (pod)", "podSecurityContext: {seccompProfile: {type: Unconfined}}", "seccompProfile"},
		{"unconfined seccomp (container)", "securityContext: {seccompProfile: {type: Unconfined}}", "seccompProfile"},
		{"no seccomp profile", "securityContext: {seccompProfile: null}", "seccompProfile"},
		{"secret flag as an argument", "extraArgs: ['--webhook-url=https://x.example.com']", "extraArgs"},
		{"secret flag as plain env", "extraEnv: [{name: WATCHDOG_WEBHOOK_SECRET, value: k}]", "extraEnv"},
		{"bad digest", "image: {digest: latest}", "digest"},
		// Checks across values, made by the templates.
		{"deadline not longer than timeout", "cronjob: {activeDeadlineSeconds: 180}", "activeDeadlineSeconds"},
		{"deadline past the interval", "cronjob: {activeDeadlineSeconds: 300}", "interval"},
		{"deadline past a */2 interval", "cronjob: {schedule: '*/2 * * * *'}", "interval"},
		{"confirmation does not fit a run", "run: {timeout: 90s}\ndecision: {confirmWindow: 2m}\ncronjob: {activeDeadlineSeconds: 120}", "confirmWindow"},
		{"scrape timeout beyond run", "run: {timeout: 30s}\ndecision: {confirmWindow: 0s}\nscheduler: {scrapeTimeout: 1m}", "scrapeTimeout"},
		{"HMAC key without webhook", "alerts: {webhookSecret: k-of-32-bytes-or-more-for-the-test}", "webhookURL"},
		{"dry run and shadow mode", "dryRun: true\ndecision: {shadow: true}", "decision.shadow"},
		{"existing secret and values", "alerts: {existingSecret: s, webhookURL: 'https://h.example.com'}", "existingSecret"},
		{"election on the scheduler's lease", "mode: deployment\ndeployment: {replicas: 2, leaderElection: {lease: agentenv-scheduler}}\nscheduler: {leaderLease: agentenv-scheduler}", "leaderLease"},
		{"no ServiceAccount", "serviceAccount: {create: false}", "serviceAccount.name"},
		{"the namespace's default ServiceAccount", "serviceAccount: {create: false, name: default}", "serviceAccount.name: default"},
		{"a chart-made ServiceAccount named default", "serviceAccount: {create: true, name: default}", "serviceAccount.name: default"},
		// Single values the binary refuses, found by TestValuesContract.
		{"restart window beyond the kept history", "restart: {window: 169h}", "restart.window"},
		{"sub-second interval", "mode: deployment\ndeployment: {interval: 500ms}", "deployment.interval"},
		{"duration beyond a Go duration", "alerts: {realertInterval: 2562048h}", "alerts.realertInterval"},
		{"selector the watchdog cannot parse", "scheduler: {selector: 'app=x,,tier=y'}\nadmissionPolicy: {enabled: false}", "scheduler.selector"},
		{"network policy without the API server", "networkPolicy: {enabled: true}", "networkPolicy.apiServer.cidrs"},
		{"Alertmanager TTL under a second", "alerts: {alertmanagerAlertTTL: 500ms}", "alertmanagerAlertTTL"},
		{"Alertmanager TTL not above the interval", "mode: deployment\nalerts: {alertmanagerURLs: ['https://am.example.com'], alertmanagerAlertTTL: 30s}", "deployment.interval"},
		{"Alertmanager credentials without a URL", "alerts: {alertmanagerBearerToken: t}", "alertmanagerURLs"},
		{"Alertmanager credentials over plain http", "alerts: {alertmanagerURLs: ['http://am.example.com'], alertmanagerUsername: u}", "plain http"},
		{"Alertmanager token and basic auth", "alerts: {alertmanagerURLs: ['https://am.example.com'], alertmanagerUsername: u, alertmanagerBearerToken: t}", "not both"},
		{"Alertmanager password without user", "alerts: {alertmanagerURLs: ['https://am.example.com'], alertmanagerPassword: p}", "alertmanagerUsername"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := renderErr(t, c.values)
			if err == nil {
				t.Fatalf("helm template accepted %q:\n%.400s", c.values, out)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error does not name %q:\n%v", c.want, err)
			}
		})
	}
}

// TestSchemaAcceptsSensibleValues guards against a schema so strict it rejects real
// configurations (and makes TestSchemaRejectsNonsense meaningful).
func TestSchemaAcceptsSensibleValues(t *testing.T) {
	for _, v := range goodValues {
		t.Run(v.name, func(t *testing.T) {
			render(t, v.values)
		})
	}
}

// goMemLimitUnder: GOMEMLIMIT is set in bytes, with headroom under the container's
// memory limit (the runtime's limit does not cover all of the process's memory).
func goMemLimitUnder(t *testing.T, c corev1.Container) {
	t.Helper()
	e := envOf(c)["GOMEMLIMIT"]
	got, err := strconv.ParseInt(e.Value, 10, 64)
	if err != nil {
		t.Fatalf("GOMEMLIMIT %+v is not a number of bytes: %v", e, err)
	}
	if lim := c.Resources.Limits.Memory().Value(); float64(got) < 0.8*float64(lim) || float64(got) > 0.95*float64(lim) {
		t.Errorf("GOMEMLIMIT %d bytes for a %d-byte limit: want 80-95%% of it", got, lim)
	}
}

// TestGoMemLimit sweeps the forms a memory limit takes; without one, no GOMEMLIMIT.
func TestGoMemLimit(t *testing.T) {
	for _, limit := range []string{"64Mi", "'128M'", "1Gi", "0.5Gi", "100000000", "2.5e8", "'100000000'", "48Mi"} {
		t.Run(limit, func(t *testing.T) {
			for _, mode := range []string{"cronjob", "deployment"} {
				goMemLimitUnder(t, render(t, "mode: "+mode+"\nresources: {limits: {memory: "+limit+"}}").podSpec().Containers[0])
			}
		})
	}
	r := render(t, "resources: {limits: {memory: null}}")
	if e, ok := envOf(r.podSpec().Containers[0])["GOMEMLIMIT"]; ok {
		t.Errorf("GOMEMLIMIT %+v without a memory limit", e)
	}
	if _, err := renderErr(t, "resources: {limits: {memory: 64 MiB}}"); err == nil || !strings.Contains(err.Error(), "resources.limits.memory") {
		t.Errorf("a memory limit the chart cannot read: %v", err)
	}
}

var goodValues = []struct{ name, values string }{
	{"defaults", ""},
	{"rollout", "restart: {method: rollout}"},
	{"alert only", "restart: {maxRestarts: 0}"},
	{"deployment HA", "mode: deployment\ndeployment: {replicas: 3, service: {enabled: true}}\nscheduler: {leaderLease: agentenv-scheduler}"},
	{"all sinks", "alerts: {slackWebhookURL: 'https://hooks.slack.com/services/T/B/X', webhookURL: 'https://h.example.com:8443/hook?x=1', webhookSecret: k-of-32-bytes-or-more-for-the-test, heartbeatURL: 'https://hc-ping.com/uuid', runbookURL: 'https://wiki.example.com/wd', clusterName: prod}"},
	{"existing secret", "alerts: {existingSecret: wd-alerts}"},
	{"durations", "decision: {startupGrace: 0s, confirmWindow: '0', wedgedFor: 1h30m, maxWatchAge: 2.5m, sampleInterval: 500ms}\nrun: {timeout: 4m}\ncronjob: {schedule: '*/10 * * * *', activeDeadlineSeconds: 480}"},
	{"dry run, other namespace", "dryRun: true\nscheduler: {namespace: agentenv-system-2}\ncronjob: {suspend: true, timeZone: America/New_York}"},
	{"hourly macro", "cronjob: {schedule: '@hourly'}"},
	{"digest", "image: {digest: 'sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef'}"},
	{"openshift-style uid", "podSecurityContext: {runAsNonRoot: true, runAsUser: null, runAsGroup: null}\nsecurityContext: {runAsNonRoot: true, runAsUser: null, runAsGroup: null, readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}"},
	{"own ServiceAccount and RBAC", "serviceAccount: {create: false, name: watchdog-sa}\nrbac: {create: false}"},
	{"extras", "extraArgs: ['--log-level=debug']\nextraEnv: [{name: TZ, value: UTC}, {name: WATCHDOG_WEBHOOK_URL, valueFrom: {secretKeyRef: {name: s, key: k}}}]\npodAnnotations: {a: b}\nnodeSelector: {kubernetes.io/os: linux}"},
}

// TestLintClean: `helm lint --strict` passes for the defaults and every sensible
// configuration above.
func TestLintClean(t *testing.T) {
	for _, v := range goodValues {
		t.Run(v.name, func(t *testing.T) {
			args := []string{"lint", "--strict", chartDir, "--namespace", renderNamespace}
			if v.values != "" {
				args = append(args, "-f", valuesFile(t, v.values))
			}
			out, stderr, err := helm(t, args...)
			if err != nil || !strings.Contains(out, "0 chart(s) failed") || strings.Contains(out, "[WARNING]") || strings.Contains(out, "[ERROR]") {
				t.Fatalf("helm lint: %v\n%s%s", err, out, stderr)
			}
		})
	}
	// And lint fails on nonsense (the check can fail).
	if out, _, err := helm(t, "lint", "--strict", chartDir, "--set", "restart.method=kill"); err == nil {
		t.Fatalf("helm lint accepted restart.method=kill:\n%s", out)
	}
}

// TestOneValuesReference: the chart's README (generated from values.yaml, kept
// current by hack/chart-readme's test) is the one table of values: every value has a
// description there, its own or its parent's, and docs/chart.md links to it instead
// of keeping a second table that would drift.
func TestOneValuesReference(t *testing.T) {
	root := filepath.Dir(filepath.Dir(chartDir))
	doc, err := os.ReadFile(filepath.Join(root, "docs", "chart.md"))
	must(t, err)
	if !strings.Contains(string(doc), "(../charts/agentenv-scheduler-watchdog/README.md#values)") {
		t.Error("docs/chart.md does not link to the chart README's values")
	}
	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	must(t, err)
	described := map[string]bool{}
	var keys []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)` \\| [a-z]+ \\| .*? \\| (.*) \\|$").FindAllStringSubmatch(string(readme), -1) {
		keys = append(keys, m[1])
		described[m[1]] = strings.TrimSpace(m[2]) != ""
	}
	if len(keys) < 100 {
		t.Fatalf("only %d values in the chart README", len(keys))
	}
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)` \\|").FindAllStringSubmatch(string(doc), -1) {
		if _, ok := described[m[1]]; ok {
			t.Errorf("docs/chart.md keeps a values table of its own (row %s): link to the chart README", m[1])
		}
	}
	for _, k := range keys {
		if described[k] {
			continue
		}
		ok := false
		for p := k; strings.Contains(p, ".") && !ok; {
			p = p[:strings.LastIndex(p, ".")]
			ok = described[p]
		}
		if !ok {
			t.Errorf("chart README: %s has no description, nor has any value above it (add a `# --` comment in values.yaml)", k)
		}
	}
}

// TestGlobalImageRegistry: global.imageRegistry, the mirror convention of most
// charts, is used, never silently ignored: it replaces the registry of
// image.repository in every container the chart runs (workload and test hook),
// keeping the image's path; what is not a registry is refused by the schema.
func TestGlobalImageRegistry(t *testing.T) {
	for _, c := range []struct{ values, want string }{
		{"", "ghcr.io/agentenv/scheduler-watchdog:"},
		{"global: {imageRegistry: 'registry.corp.example:5000'}", "registry.corp.example:5000/agentenv/scheduler-watchdog:"},
		{"global: {imageRegistry: 'mirror.example/ghcr/'}", "mirror.example/ghcr/agentenv/scheduler-watchdog:"},
		{"global: {imageRegistry: 'localhost:5000'}\nimage: {repository: agentenv/wd}", "localhost:5000/agentenv/wd:"},
		{"global: {imageRegistry: 'localhost:5000'}\nimage: {repository: 'localhost/wd', digest: 'sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef'}",
			"localhost:5000/wd@sha256:"},
		{"mode: deployment\nglobal: {imageRegistry: 'registry.corp.example'}", "registry.corp.example/agentenv/scheduler-watchdog:"},
	} {
		r := render(t, c.values)
		for what, image := range map[string]string{"workload": r.podSpec().Containers[0].Image, "helm test hook": r.doctorPod().Spec.Containers[0].Image} {
			if !strings.HasPrefix(image, c.want) {
				t.Errorf("%q: %s image %q, want %s...", c.values, what, image, c.want)
			}
		}
	}
	for _, bad := range []string{"https://registry.example", "Registry.Example", "registry.example:port"} {
		if _, err := renderErr(t, "global: {imageRegistry: '"+bad+"'}"); err == nil || !strings.Contains(err.Error(), "imageRegistry") {
			t.Errorf("global.imageRegistry %q: want refused by the schema, got %v", bad, err)
		}
	}
}

// TestExtraVolumesAndCABundle: extraVolumes and extraVolumeMounts reach the pods of
// both modes and the helm test hook, beside the CA bundle's volume; the root
// filesystem stays read-only; both a ConfigMap and a Secret bundle are refused.
func TestExtraVolumesAndCABundle(t *testing.T) {
	const extras = "extraVolumes: [{name: corp, secret: {secretName: corp-tls}}]\nextraVolumeMounts: [{name: corp, mountPath: /etc/corp, readOnly: true}]\n"
	for _, mode := range []string{"cronjob", "deployment"} {
		r := render(t, extras+"caBundle: {secret: corp-ca}\nmode: "+mode)
		for what, spec := range map[string]*corev1.PodSpec{"workload": r.podSpec(), "helm test hook": &r.doctorPod().Spec} {
			vols := map[string]corev1.Volume{}
			for _, v := range spec.Volumes {
				vols[v.Name] = v
			}
			if vols["corp"].Secret == nil || vols["corp"].Secret.SecretName != "corp-tls" || vols["ca-bundle"].Secret == nil || vols["ca-bundle"].Secret.SecretName != "corp-ca" {
				t.Errorf("%s, %s: volumes %+v", mode, what, spec.Volumes)
			}
			c := spec.Containers[0]
			mounts := map[string]string{}
			for _, m := range c.VolumeMounts {
				mounts[m.Name] = m.MountPath
			}
			if mounts["corp"] != "/etc/corp" || mounts["ca-bundle"] != "/etc/watchdog/ca" || envOf(c)["SSL_CERT_DIR"].Value != "/etc/watchdog/ca" {
				t.Errorf("%s, %s: mounts %v, SSL_CERT_DIR %q", mode, what, mounts, envOf(c)["SSL_CERT_DIR"].Value)
			}
			if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
				t.Errorf("%s, %s: the root filesystem is no longer read-only", mode, what)
			}
		}
	}
	plain := render(t, "")
	if spec := plain.podSpec(); len(spec.Volumes) != 0 || len(spec.Containers[0].VolumeMounts) != 0 {
		t.Errorf("a default install mounts %+v %+v", spec.Volumes, spec.Containers[0].VolumeMounts)
	}
	if _, err := renderErr(t, "caBundle: {configMap: a, secret: b}"); err == nil || !strings.Contains(err.Error(), "caBundle") {
		t.Errorf("both a ConfigMap and a Secret bundle: %v", err)
	}
}

// TestAlertLabelsValue: alerts.extraLabels reaches the watchdog as --alert-labels
// (sorted name=value pairs; none by default), in the workload and the hook; the
// schema refuses the watchdog's own label names and values a comma would split.
func TestAlertLabelsValue(t *testing.T) {
	r := render(t, "alerts: {extraLabels: {tier: '1', team: scheduling}}")
	for what, c := range map[string]corev1.Container{"workload": r.podSpec().Containers[0], "hook": r.doctorPod().Spec.Containers[0]} {
		if got := envOf(c)["WATCHDOG_ALERT_LABELS"].Value; got != "team=scheduling,tier=1" {
			t.Errorf("%s: WATCHDOG_ALERT_LABELS=%q", what, got)
		}
	}
	if got, ok := envOf(render(t, "").podSpec().Containers[0])["WATCHDOG_ALERT_LABELS"]; !ok || got.Value != "" {
		t.Errorf("default: WATCHDOG_ALERT_LABELS %+v (set: %v), want empty", got, ok)
	}
	for _, bad := range []string{"{severity: low}", "{'te-am': x}", "{team: 'a,b'}", "{team: ''}"} {
		if _, err := renderErr(t, "alerts: {extraLabels: "+bad+"}"); err == nil {
			t.Errorf("alerts.extraLabels %s accepted", bad)
		}
	}
}
