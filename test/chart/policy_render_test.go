package chart

import (
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TestAdmissionPolicyRender: the admission policy is on by default, concerns only the
// chart's ServiceAccount, is named per release and namespace, allows only the
// configured restart, and names the selector in its message. (What it enforces is
// proven on the API server: TestChartEpisode, TestAdmissionPolicySelector.)
func TestAdmissionPolicyRender(t *testing.T) {
	const name = fullname + "-" + renderNamespace
	type policy struct {
		vap     admissionv1.ValidatingAdmissionPolicy
		binding admissionv1.ValidatingAdmissionPolicyBinding
	}
	get := func(t *testing.T, values string) *policy {
		t.Helper()
		r := render(t, values)
		p := &policy{}
		r.one("ValidatingAdmissionPolicy", &p.vap)
		r.one("ValidatingAdmissionPolicyBinding", &p.binding)
		if p.vap.Name != name || p.binding.Name != name || p.binding.Spec.PolicyName != name {
			t.Errorf("names %q / %q → %q, want %q", p.vap.Name, p.binding.Name, p.binding.Spec.PolicyName, name)
		}
		if len(p.binding.Spec.ValidationActions) != 1 || p.binding.Spec.ValidationActions[0] != admissionv1.Deny {
			t.Errorf("binding actions %v, want [Deny]", p.binding.Spec.ValidationActions)
		}
		if p.vap.Spec.FailurePolicy == nil || *p.vap.Spec.FailurePolicy != admissionv1.Fail {
			t.Errorf("failurePolicy %v, want Fail", p.vap.Spec.FailurePolicy)
		}
		return p
	}
	// messages joins each validation's message with its expression.
	messages := func(p *policy) string {
		var b strings.Builder
		for _, v := range p.vap.Spec.Validations {
			b.WriteString(v.Message + " :: " + v.Expression + "\n")
		}
		return b.String()
	}

	t.Run("defaults", func(t *testing.T) {
		p := get(t, "")
		mc := p.vap.Spec.MatchConditions
		if len(mc) != 1 || mc[0].Expression != "request.userInfo.username == 'system:serviceaccount:agentenv-system:"+fullname+"'" {
			t.Errorf("matchConditions %+v, want the chart's ServiceAccount only", mc)
		}
		m := messages(p)
		for _, want := range []string{
			`match the selector "app.kubernetes.io/name=agentenv-scheduler"`,
			`request.namespace == 'agentenv-system' && ('app.kubernetes.io/name' in variables.labels && variables.labels['app.kubernetes.io/name'] == 'agentenv-scheduler')`,
			"the watchdog changes no Deployment (restart.method delete)",
		} {
			if !strings.Contains(m, want) {
				t.Errorf("validations lack %q:\n%s", want, m)
			}
		}
	})
	t.Run("rollout", func(t *testing.T) {
		m := messages(get(t, "restart: {method: rollout}"))
		for _, want := range []string{"the watchdog deletes no pods (restart.method rollout)", "request.name == 'agentenv-scheduler'", "kubectl.kubernetes.io/restartedAt", "object.spec.template.?spec == oldObject.spec.template.?spec"} {
			if !strings.Contains(m, want) {
				t.Errorf("validations lack %q:\n%s", want, m)
			}
		}
	})
	t.Run("alert only", func(t *testing.T) {
		m := messages(get(t, "restart: {maxRestarts: 0}"))
		for _, want := range []string{"the watchdog deletes no pods (restart.maxRestarts 0)", "the watchdog changes no Deployment (restart.maxRestarts 0)"} {
			if !strings.Contains(m, want) {
				t.Errorf("validations lack %q:\n%s", want, m)
			}
		}
	})
	t.Run("own ServiceAccount, scheduler elsewhere", func(t *testing.T) {
		p := get(t, "serviceAccount: {create: false, name: my-sa}\nscheduler: {namespace: sched-ns}")
		if got := p.vap.Spec.MatchConditions[0].Expression; !strings.Contains(got, "'system:serviceaccount:agentenv-system:my-sa'") {
			t.Errorf("matchCondition %q", got)
		}
		if m := messages(p); !strings.Contains(m, "request.namespace == 'sched-ns'") {
			t.Errorf("validations do not name the scheduler's namespace:\n%s", m)
		}
	})
	t.Run("off", func(t *testing.T) {
		r := render(t, "admissionPolicy: {enabled: false}")
		if n := len(r.kinds("ValidatingAdmissionPolicy")) + len(r.kinds("ValidatingAdmissionPolicyBinding")); n != 0 {
			t.Errorf("admissionPolicy.enabled=false rendered %d policy objects", n)
		}
	})
	// Selectors the chart cannot translate are refused, whatever the policy setting.
	for _, sel := range []string{"app>1", "app=x,,tier=y", "(app)", "app=x y", "app in ()", ","} {
		for _, enabled := range []string{"true", "false"} {
			if out, err := renderErr(t, "scheduler: {selector: '"+sel+"'}\nadmissionPolicy: {enabled: "+enabled+"}"); err == nil || !strings.Contains(err.Error(), "scheduler.selector") {
				t.Errorf("selector %q (policy %s): err %v\n%.300s", sel, enabled, err, out)
			}
		}
	}
}

// TestNetworkPolicy: off by default; when on, egress only to the API server, the
// scheduler pods' metrics port (podSelector = scheduler.selector), DNS and the alert
// receivers, and ingress only to `watchdog run`'s metrics port. Rendering only: the
// test API server has no CNI to enforce it.
func TestNetworkPolicy(t *testing.T) {
	if n := len(render(t, "").kinds("NetworkPolicy")); n != 0 {
		t.Fatalf("a NetworkPolicy by default (%d)", n)
	}
	if _, err := renderErr(t, "networkPolicy: {enabled: true}"); err == nil || !strings.Contains(err.Error(), "networkPolicy.apiServer.cidrs") {
		t.Fatalf("enabled without the API server's address: %v", err)
	}
	get := func(t *testing.T, values string) *networkingv1.NetworkPolicy {
		t.Helper()
		var np networkingv1.NetworkPolicy
		render(t, "networkPolicy: {enabled: true, apiServer: {cidrs: [10.96.0.1/32, 172.18.0.2/32]}}\n"+values).one("NetworkPolicy", &np)
		sel := np.Spec.PodSelector.MatchLabels
		if sel["app.kubernetes.io/instance"] != release || sel["app.kubernetes.io/component"] != "watchdog" {
			t.Errorf("podSelector %v does not select the watchdog's pods", sel)
		}
		if len(np.Spec.PolicyTypes) != 2 {
			t.Errorf("policyTypes %v, want Ingress and Egress", np.Spec.PolicyTypes)
		}
		return &np
	}
	ports := func(r networkingv1.NetworkPolicyEgressRule) []string {
		var out []string
		for _, p := range r.Ports {
			out = append(out, string(*p.Protocol)+"/"+p.Port.String())
		}
		return out
	}
	cidrs := func(r networkingv1.NetworkPolicyEgressRule) []string {
		var out []string
		for _, p := range r.To {
			if p.IPBlock != nil {
				out = append(out, p.IPBlock.CIDR)
			}
		}
		return out
	}
	// selects reports whether the egress rule's podSelector behaves like selector.
	sameSelector := func(t *testing.T, r networkingv1.NetworkPolicyEgressRule, ns, selector string) {
		t.Helper()
		if len(r.To) != 1 || r.To[0].PodSelector == nil || r.To[0].NamespaceSelector == nil {
			t.Fatalf("scheduler rule %+v", r)
		}
		if got := r.To[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"]; got != ns {
			t.Errorf("scheduler rule's namespace %q, want %q", got, ns)
		}
		got, err := metav1.LabelSelectorAsSelector(r.To[0].PodSelector)
		must(t, err)
		want, err := labels.Parse(selector)
		must(t, err)
		for _, l := range []labels.Set{
			{}, {"app.kubernetes.io/name": "agentenv-scheduler"}, {"app.kubernetes.io/name": "sched", "track": "a"},
			{"app.kubernetes.io/name": "agentenv-scheduler", "track": "a"}, {"app.kubernetes.io/name": "agentenv-scheduler", "track": "a", "tier": "canary"},
			{"app.kubernetes.io/name": "agentenv-scheduler", "track": "a", "experimental": "1"}, {"app.kubernetes.io/name": "other", "track": "a"},
		} {
			if got.Matches(l) != want.Matches(l) {
				t.Errorf("podSelector %s and %q disagree on %v", got, selector, l)
			}
		}
	}

	t.Run("cronjob", func(t *testing.T) {
		np := get(t, "")
		if len(np.Spec.Ingress) != 0 {
			t.Errorf("cronjob mode allows ingress: %+v", np.Spec.Ingress)
		}
		e := np.Spec.Egress
		if len(e) != 4 {
			t.Fatalf("%d egress rules, want API server, scheduler, DNS, receivers: %+v", len(e), e)
		}
		if got := strings.Join(cidrs(e[0]), ","); got != "10.96.0.1/32,172.18.0.2/32" || strings.Join(ports(e[0]), ",") != "TCP/443,TCP/6443" {
			t.Errorf("API server rule %v %v", cidrs(e[0]), ports(e[0]))
		}
		sameSelector(t, e[1], renderNamespace, "app.kubernetes.io/name=agentenv-scheduler")
		if got := strings.Join(ports(e[1]), ","); got != "TCP/9101" {
			t.Errorf("scheduler rule ports %s", got)
		}
		if got := strings.Join(ports(e[2]), ","); got != "UDP/53,TCP/53" || e[2].To[0].PodSelector.MatchLabels["k8s-app"] != "kube-dns" {
			t.Errorf("DNS rule %+v", e[2])
		}
		if got := strings.Join(cidrs(e[3]), ","); got != "0.0.0.0/0,::/0" || strings.Join(ports(e[3]), ",") != "TCP/443" {
			t.Errorf("receivers rule %v %v", cidrs(e[3]), ports(e[3]))
		}
	})
	t.Run("deployment", func(t *testing.T) {
		const sel = "app.kubernetes.io/name in (agentenv-scheduler, sched),tier!=canary,!experimental,track"
		np := get(t, "mode: deployment\ndeployment: {metricsPort: 9300}\nscheduler: {namespace: sched-ns, metricsPort: 9200, selector: '"+sel+"'}\n"+
			"networkPolicy: {enabled: true, apiServer: {cidrs: [10.96.0.1/32]}, metricsFrom: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}}], dns: {enabled: false}, alertReceivers: {cidrs: [192.0.2.0/24], except: [192.0.2.8/29], ports: [8443]}}")
		if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].Ports) != 1 || np.Spec.Ingress[0].Ports[0].Port.IntValue() != 9300 ||
			len(np.Spec.Ingress[0].From) != 1 || np.Spec.Ingress[0].From[0].NamespaceSelector == nil {
			t.Errorf("ingress %+v, want only port 9300 from the monitoring namespace", np.Spec.Ingress)
		}
		e := np.Spec.Egress
		if len(e) != 3 {
			t.Fatalf("%d egress rules, want API server, scheduler, receivers (no DNS): %+v", len(e), e)
		}
		sameSelector(t, e[1], "sched-ns", sel)
		if got := strings.Join(ports(e[1]), ","); got != "TCP/9200" {
			t.Errorf("scheduler rule ports %s", got)
		}
		if got := strings.Join(ports(e[2]), ","); got != "TCP/8443" || e[2].To[0].IPBlock.CIDR != "192.0.2.0/24" || len(e[2].To[0].IPBlock.Except) != 1 {
			t.Errorf("receivers rule %+v", e[2])
		}
	})
	t.Run("no receivers", func(t *testing.T) {
		np := get(t, "networkPolicy: {enabled: true, apiServer: {cidrs: [10.96.0.1/32]}, alertReceivers: {cidrs: []}}")
		if len(np.Spec.Egress) != 3 {
			t.Errorf("alertReceivers.cidrs [] still renders a receivers rule: %+v", np.Spec.Egress)
		}
	})
}
