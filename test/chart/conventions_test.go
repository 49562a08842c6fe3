package chart

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestKubeVersionFloor: the chart needs batch/v1 CronJob timeZone and the GA
// ValidatingAdmissionPolicy (1.30): helm refuses an older cluster before rendering
// anything, and accepts 1.30 with a managed cluster's pre-release suffix.
func TestKubeVersionFloor(t *testing.T) {
	for _, old := range []string{"1.29.0", "1.29.15", "1.27.3"} {
		out, err := renderErr(t, "", "--kube-version", old)
		if err == nil {
			t.Errorf("helm template --kube-version %s rendered:\n%.300s", old, out)
			continue
		}
		if !strings.Contains(err.Error(), "kubeVersion") && !strings.Contains(err.Error(), "incompatible") {
			t.Errorf("--kube-version %s fails without naming kubeVersion: %v", old, err)
		}
	}
	for _, ok := range []string{"1.30.0", "1.30.4-eks-1234567", "1.31.2-gke.1200000", "1.37.2"} {
		if _, err := renderErr(t, "", "--kube-version", ok); err != nil {
			t.Errorf("--kube-version %s refused: %v", ok, err)
		}
	}
}

// TestRenderDeterministic: no value is generated at render time (GitOps tools
// render on every sync), and `helm template` needs no --kube-version (Helm's
// offline default is 1.20, under the floor).
func TestRenderDeterministic(t *testing.T) {
	for _, values := range []string{"", "mode: deployment\nalerts: {webhookURL: 'https://hooks.example.com/x', webhookSecret: s3cr3t-s3cr3t-s3cr3t-s3cr3t-s3cr3t}\n"} {
		var outs []string
		for range 2 {
			args := []string{"template", release, chartDir, "--namespace", renderNamespace}
			if values != "" {
				args = append(args, "-f", valuesFile(t, values))
			}
			out, stderr, err := helm(t, args...)
			if err != nil {
				t.Fatalf("helm template without --kube-version: %v: %s", err, stderr)
			}
			outs = append(outs, out)
		}
		if outs[0] != outs[1] {
			t.Errorf("two renders of %q differ", values)
		}
	}
}

// release010 is the commit of the 0.1.0 release (CHANGELOG.md).
const release010 = "6a18c64"

// TestReuseValuesFromTheRelease: `helm upgrade --reuse-values` from 0.1.0 renders
// this chart with 0.1.0's values (its defaults, without every value added since):
// the render fails first, naming a missing value and --reset-then-reuse-values.
// Before: a nil pointer at probe.mode deep in the doctor hook's environment.
func TestReuseValuesFromTheRelease(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "chart")
	must(t, os.CopyFS(dir, os.DirFS(chartDir)))
	old, err := os.ReadFile(filepath.Join(chartAt(t, release010), "values.yaml"))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "values.yaml"), old, 0o644))
	out, stderr, err := helm(t, "template", release, dir, "--namespace", renderNamespace)
	if err == nil || !strings.Contains(stderr, "--reset-then-reuse-values") || !strings.Contains(stderr, "is missing") {
		t.Fatalf("rendered with 0.1.0's values: %v\n%s%.300s", err, stderr, out)
	}
}

func (r *rendered) pdb() *policyv1.PodDisruptionBudget {
	var p policyv1.PodDisruptionBudget
	r.one("PodDisruptionBudget", &p)
	return &p
}

// TestDisruptionBudgetAndSpreadOnlyForReplicas: several `watchdog run` replicas get a
// PodDisruptionBudget and a spread over nodes and zones, both selecting exactly the
// Deployment's pods; the CronJob and a single replica get neither.
func TestDisruptionBudgetAndSpreadOnlyForReplicas(t *testing.T) {
	for _, c := range []struct{ name, values string }{
		{"cronjob", ""},
		{"cronjob, even with deployment.replicas 3", "deployment: {replicas: 3}"},
		{"one replica", "mode: deployment"},
		{"no replicas", "mode: deployment\ndeployment: {replicas: 0}"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := render(t, c.values)
			if n := len(r.kinds("PodDisruptionBudget")); n != 0 {
				t.Errorf("rendered %d PodDisruptionBudget", n)
			}
			if tsc := r.podSpec().TopologySpreadConstraints; len(tsc) != 0 {
				t.Errorf("topologySpreadConstraints %+v", tsc)
			}
		})
	}

	r := render(t, "mode: deployment\ndeployment: {replicas: 3}")
	d, pdb := r.deployment(), r.pdb()
	podLabels := labels.Set(d.Spec.Template.Labels)
	if pdb.Namespace != renderNamespace || pdb.Name != fullname {
		t.Errorf("PodDisruptionBudget %s/%s", pdb.Namespace, pdb.Name)
	}
	if pdb.Spec.MaxUnavailable == nil || *pdb.Spec.MaxUnavailable != intstr.FromInt32(1) || pdb.Spec.MinAvailable != nil {
		t.Errorf("maxUnavailable %v minAvailable %v, want maxUnavailable 1 only", pdb.Spec.MaxUnavailable, pdb.Spec.MinAvailable)
	}
	if p := pdb.Spec.UnhealthyPodEvictionPolicy; p == nil || *p != policyv1.AlwaysAllow {
		t.Errorf("unhealthyPodEvictionPolicy %v, want AlwaysAllow (a crash-looping watchdog must not block a drain)", p)
	}
	// The budget selects exactly what the Deployment selects: its pods, no one else's.
	if !equalSelector(pdb.Spec.Selector, d.Spec.Selector) {
		t.Errorf("PodDisruptionBudget selector %v, Deployment selector %v", pdb.Spec.Selector, d.Spec.Selector)
	}
	mustSelect(t, "PodDisruptionBudget", pdb.Spec.Selector, podLabels)

	tsc := d.Spec.Template.Spec.TopologySpreadConstraints
	keys := map[string]bool{}
	for _, c := range tsc {
		keys[c.TopologyKey] = true
		if c.MaxSkew != 1 || c.WhenUnsatisfiable != corev1.ScheduleAnyway {
			t.Errorf("%s: maxSkew %d %s, want 1 ScheduleAnyway (soft: a small cluster still schedules every replica)", c.TopologyKey, c.MaxSkew, c.WhenUnsatisfiable)
		}
		mustSelect(t, "spread over "+c.TopologyKey, c.LabelSelector, podLabels)
		if len(c.MatchLabelKeys) != 1 || c.MatchLabelKeys[0] != "pod-template-hash" {
			t.Errorf("%s: matchLabelKeys %v, want [pod-template-hash]: only the current rollout's pods count", c.TopologyKey, c.MatchLabelKeys)
		}
	}
	if len(tsc) != 2 || !keys["kubernetes.io/hostname"] || !keys["topology.kubernetes.io/zone"] {
		t.Errorf("topologySpreadConstraints %+v, want hostname and zone", tsc)
	}

	// Tuning and turning off.
	r = render(t, `mode: deployment
deployment:
  replicas: 4
  podDisruptionBudget: {maxUnavailable: "50%", unhealthyPodEvictionPolicy: IfHealthyBudget}
  topologySpreadConstraints:
    - {maxSkew: 2, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, minDomains: 2,
       labelSelector: {matchLabels: {custom: sel}}, matchLabelKeys: []}
`)
	pdb = r.pdb()
	if *pdb.Spec.MaxUnavailable != intstr.FromString("50%") || *pdb.Spec.UnhealthyPodEvictionPolicy != policyv1.IfHealthyBudget {
		t.Errorf("tuned budget: maxUnavailable %v policy %v", pdb.Spec.MaxUnavailable, *pdb.Spec.UnhealthyPodEvictionPolicy)
	}
	tsc = r.deployment().Spec.Template.Spec.TopologySpreadConstraints
	if len(tsc) != 1 || tsc[0].MaxSkew != 2 || tsc[0].WhenUnsatisfiable != corev1.DoNotSchedule || tsc[0].MinDomains == nil || *tsc[0].MinDomains != 2 ||
		tsc[0].LabelSelector.MatchLabels["custom"] != "sel" || len(tsc[0].MatchLabelKeys) != 0 {
		t.Errorf("a given entry must be kept as written (its own labelSelector and matchLabelKeys): %+v", tsc)
	}
	r = render(t, "mode: deployment\ndeployment: {replicas: 2, podDisruptionBudget: {enabled: false}, topologySpreadConstraints: []}")
	if n := len(r.kinds("PodDisruptionBudget")); n != 0 {
		t.Errorf("podDisruptionBudget.enabled false rendered %d", n)
	}
	if tsc := r.deployment().Spec.Template.Spec.TopologySpreadConstraints; len(tsc) != 0 {
		t.Errorf("topologySpreadConstraints [] rendered %+v", tsc)
	}
}

func equalSelector(a, b *metav1.LabelSelector) bool {
	sa, err1 := metav1.LabelSelectorAsSelector(a)
	sb, err2 := metav1.LabelSelectorAsSelector(b)
	return err1 == nil && err2 == nil && sa.String() == sb.String()
}

func mustSelect(t *testing.T, what string, sel *metav1.LabelSelector, pod labels.Set) {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil || sel == nil || s.Empty() {
		t.Errorf("%s: selector %v (%v)", what, sel, err)
		return
	}
	if !s.Matches(pod) {
		t.Errorf("%s: selector %s does not select the watchdog's pods %v", what, s, pod)
	}
	for _, k := range []string{"app.kubernetes.io/instance", "app.kubernetes.io/name", "app.kubernetes.io/component"} {
		if !strings.Contains(s.String(), k) {
			t.Errorf("%s: selector %s does not pin %s: it could select another release's or the scheduler's pods", what, s, k)
		}
	}
}

// TestCommonLabelsOnEveryObject: commonLabels reach every object any configuration
// renders, and the pod templates, but never a selector (immutable after install).
func TestCommonLabelsOnEveryObject(t *testing.T) {
	common := "commonLabels: {team: sre, example.com/cost-center: \"42\"}\n"
	var objs []*rendered
	for _, v := range []string{
		"alerts: {webhookURL: 'https://h.example.com/x', webhookSecret: k-of-32-bytes-or-more-for-the-test}",
		"mode: deployment\ndeployment: {replicas: 3, service: {enabled: true}}\nscheduler: {leaderLease: sched, namespace: other}",
		"mode: deployment",
		"restart: {method: rollout}",
	} {
		objs = append(objs, render(t, common+v))
	}
	kinds := map[string]bool{}
	for _, r := range objs {
		for _, o := range r.objs {
			kinds[o.GetKind()] = true
			l := o.GetLabels()
			if l["team"] != "sre" || l["example.com/cost-center"] != "42" {
				t.Errorf("%s %s labels %v lack commonLabels", o.GetKind(), o.GetName(), l)
			}
			// Pod templates carry them; selectors do not.
			for _, path := range [][]string{
				{"spec", "template", "metadata", "labels"},
				{"spec", "jobTemplate", "metadata", "labels"},
				{"spec", "jobTemplate", "spec", "template", "metadata", "labels"},
			} {
				if m, ok, _ := unstructuredMap(o.Object, path...); ok && (m["team"] != "sre" || m["example.com/cost-center"] != "42") {
					t.Errorf("%s %s %s %v lacks commonLabels", o.GetKind(), o.GetName(), strings.Join(path, "."), m)
				}
			}
			for _, path := range [][]string{{"spec", "selector", "matchLabels"}, {"spec", "selector"}} {
				if m, ok, _ := unstructuredMap(o.Object, path...); ok {
					if _, bad := m["team"]; bad {
						t.Errorf("%s %s %s %v carries a commonLabel: selectors cannot change after install", o.GetKind(), o.GetName(), strings.Join(path, "."), m)
					}
				}
			}
		}
	}
	for _, k := range []string{"CronJob", "Deployment", "Service", "PodDisruptionBudget", "Role", "RoleBinding", "ServiceAccount", "Secret"} {
		if !kinds[k] {
			t.Errorf("no configuration rendered a %s: the test covers less than it says", k)
		}
	}
	// Without commonLabels nothing extra appears.
	for _, o := range render(t, "").objs {
		if _, ok := o.GetLabels()["team"]; ok {
			t.Errorf("%s carries team without commonLabels", o.GetKind())
		}
	}
}

func unstructuredMap(obj map[string]any, path ...string) (map[string]any, bool, error) {
	cur := any(obj)
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false, nil
		}
		if cur, ok = m[p]; !ok {
			return nil, false, nil
		}
	}
	m, ok := cur.(map[string]any)
	return m, ok, nil
}

// TestConventionValuesRejected: the schema refuses what would break the budget,
// the spread or the chart's own labels, naming the value.
func TestConventionValuesRejected(t *testing.T) {
	for _, c := range []struct{ name, values, want string }{
		{"budget that blocks every drain", "deployment: {podDisruptionBudget: {maxUnavailable: 0}}", "maxUnavailable"},
		{"budget percentage over 100", "deployment: {podDisruptionBudget: {maxUnavailable: 150%}}", "maxUnavailable"},
		{"unknown eviction policy", "deployment: {podDisruptionBudget: {unhealthyPodEvictionPolicy: Never}}", "unhealthyPodEvictionPolicy"},
		{"spread typo", "deployment: {topologySpreadConstraints: [{maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyways}]}", "whenUnsatisfiable"},
		{"spread without key", "deployment: {topologySpreadConstraints: [{maxSkew: 1, whenUnsatisfiable: ScheduleAnyway}]}", "topologyKey"},
		{"commonLabels overriding the chart's", "commonLabels: {app.kubernetes.io/name: other}", "commonLabels"},
		{"commonLabels number", "commonLabels: {cost-center: 42}", "commonLabels"},
		{"commonLabels bad value", "commonLabels: {team: 'two words'}", "commonLabels"},
		{"label in commonLabels and podLabels", "commonLabels: {team: sre}\npodLabels: {team: x}", "podLabels"},
		// helm's validator names the key but reports it at a random location.
		{"commonLabels bad key", "commonLabels: {'bad key!': x}", "bad key!"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := renderErr(t, c.values)
			if err == nil {
				t.Fatalf("helm template accepted %q:\n%.300s", c.values, out)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error does not name %q:\n%v", c.want, err)
			}
		})
	}
	// And lint is clean with them set.
	args := []string{"lint", "--strict", chartDir, "--namespace", renderNamespace, "-f",
		valuesFile(t, "mode: deployment\ndeployment: {replicas: 2}\ncommonLabels: {team: sre}")}
	if out, stderr, err := helm(t, args...); err != nil || strings.Contains(out, "[WARNING]") {
		t.Errorf("helm lint: %v\n%s%s", err, out, stderr)
	}
}
