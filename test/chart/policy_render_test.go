package chart

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
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
		// The guard (TestGuardPolicy) is the second policy of the pair.
		for kind, into := range map[string]any{"ValidatingAdmissionPolicy": &p.vap, "ValidatingAdmissionPolicyBinding": &p.binding} {
			objs := r.kinds(kind)
			if len(objs) != 2 {
				t.Fatalf("want the policy and the guard, rendered %d %s", len(objs), kind)
			}
			for _, o := range objs {
				if o.GetName() == name {
					must(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, into))
				}
			}
		}
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
		r := render(t, "networkPolicy: {enabled: true, apiServer: {cidrs: [10.96.0.1/32, 172.18.0.2/32]}}\n"+values)
		r.one("NetworkPolicy", &np)
		policySelects(t, &np, r)
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
		if got := strings.Join(ports(e[1]), ","); got != "TCP/9101,TCP/9090" { // metrics, the probe's ListNodes
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
		if got := strings.Join(ports(e[1]), ","); got != "TCP/9200,TCP/9090" {
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

// policySelects: the NetworkPolicy selects the watchdog's pods and the `helm test`
// pod (doctor), and no other pod of the namespace: a preflight outside the policy
// would pass while every run is blocked.
func policySelects(t *testing.T, np *networkingv1.NetworkPolicy, r *rendered) {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	must(t, err)
	if !sel.Matches(labels.Set(r.podTemplateLabels())) {
		t.Errorf("podSelector %s does not select the watchdog's pods %v", sel, r.podTemplateLabels())
	}
	if doctor := r.doctorPod(); !sel.Matches(labels.Set(doctor.Labels)) {
		t.Errorf("podSelector %s does not select the helm test pod %v", sel, doctor.Labels)
	}
	for _, other := range []labels.Set{
		{"app.kubernetes.io/name": "agentenv-scheduler-watchdog", "app.kubernetes.io/instance": "other", "app.kubernetes.io/component": "watchdog"},
		{"app.kubernetes.io/name": "agentenv-scheduler-watchdog", "app.kubernetes.io/instance": release, "app.kubernetes.io/component": "restart-evidence"},
		{"app.kubernetes.io/name": "agentenv-scheduler", "app.kubernetes.io/instance": release},
	} {
		if sel.Matches(other) {
			t.Errorf("podSelector %s selects %v", sel, other)
		}
	}
}

// TestNetworkPolicyExceptPerFamily: each alert receiver block gets exactly the
// excepts that are strict subsets of it, as the API server requires (the old
// template put 10.0.0.0/8 under ::/0 and `helm install` failed); an except inside
// no block fails the render. Swept over blocks and excepts of both families,
// checked against Go's own prefix arithmetic (net/netip).
func TestNetworkPolicyExceptPerFamily(t *testing.T) {
	excepts := []string{"10.0.0.0/8", "10.1.0.0/16", "192.168.0.0/16", "192.0.2.8/29", "fd00::/8", "2001:db8:1::/48", "2001:db8::ff00:0/120", "::ffff:0:0/96"}
	for _, cidrs := range [][]string{
		{"0.0.0.0/0", "::/0"},
		{"10.0.0.0/8", "2001:db8::/32"},
		{"10.0.0.0/8", "192.0.0.0/8", "::/0"},
		{"0.0.0.0/1", "128.0.0.0/1", "2001:db8::/64"},
		{"10.0.0.0/8", "10.0.0.0/12", "fc00::/7"},
	} {
		t.Run(strings.Join(cidrs, ","), func(t *testing.T) {
			// What Go says each block must carry.
			want := map[string][]string{}
			inNone := []string{}
			for _, e := range excepts {
				ep := netip.MustParsePrefix(e)
				used := false
				for _, c := range cidrs {
					cp := netip.MustParsePrefix(c)
					if cp.Addr().Is4() == ep.Addr().Is4() && ep.Bits() > cp.Bits() && cp.Contains(ep.Addr()) {
						want[c] = append(want[c], e)
						used = true
					}
				}
				if !used {
					inNone = append(inNone, e)
				}
			}
			quoted := func(l []string) string { return "'" + strings.Join(l, "', '") + "'" }
			values := fmt.Sprintf("networkPolicy: {enabled: true, apiServer: {cidrs: [10.96.0.1/32]}, alertReceivers: {cidrs: [%s], except: [%%s]}}", quoted(cidrs))
			// Every except inside some block: rendered where Go says.
			var fits []string
			for _, e := range excepts {
				if !slices.Contains(inNone, e) {
					fits = append(fits, e)
				}
			}
			var np networkingv1.NetworkPolicy
			render(t, fmt.Sprintf(values, quoted(fits))).one("NetworkPolicy", &np)
			e := np.Spec.Egress[len(np.Spec.Egress)-1]
			if len(e.To) != len(cidrs) {
				t.Fatalf("receivers rule %+v, want one block per cidr", e)
			}
			for i, peer := range e.To {
				if peer.IPBlock.CIDR != cidrs[i] || !slices.Equal(peer.IPBlock.Except, want[cidrs[i]]) {
					t.Errorf("block %s except %v, want %v", peer.IPBlock.CIDR, peer.IPBlock.Except, want[cidrs[i]])
				}
			}
			// An except inside no block is a mistake the render names.
			for _, e := range inNone {
				if out, err := renderErr(t, fmt.Sprintf(values, quoted([]string{e}))); err == nil || !strings.Contains(err.Error(), "alertReceivers.except "+e) {
					t.Errorf("except %s inside none of %v: err %v\n%.300s", e, cidrs, err, out)
				}
			}
		})
	}
}

// TestNetworkPolicyReceiverPorts: every alert receiver URL the chart knows must be
// allowed by the policy (the receivers' rule or an extraEgress rule), else the
// render fails naming the value and the port, never the URL: the default 443 would
// silently drop an in-cluster Alertmanager on 9093.
func TestNetworkPolicyReceiverPorts(t *testing.T) {
	const on = "networkPolicy: {enabled: true, apiServer: {cidrs: [10.96.0.1/32]}"
	const am = "alerts: {alertmanagerURLs: ['https://am-0.example.com/XXXXPATH', 'http://alertmanager.monitoring:9093']}\n"
	for _, c := range []struct {
		name, values string
		fails        string // the value named, "" when it renders
	}{
		{"in-cluster Alertmanager, default ports", am + on + "}", "alerts.alertmanagerURLs[1] is on port 9093"},
		{"its port added to the receivers", am + on + ", alertReceivers: {ports: [443, 9093]}}", ""},
		{"an extraEgress rule to its namespace and port", am + on + ", extraEgress: [{to: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}}], ports: [{port: 9093, protocol: TCP}]}]}", ""},
		{"an extraEgress port range", am + on + ", extraEgress: [{ports: [{port: 9000, endPort: 9100}]}]}", ""},
		{"an extraEgress rule without ports", am + on + ", extraEgress: [{to: [{podSelector: {}}]}]}", ""},
		{"an extraEgress rule for UDP only", am + on + ", extraEgress: [{ports: [{port: 9093, protocol: UDP}]}]}", "alerts.alertmanagerURLs[1] is on port 9093"},
		{"webhook on 8443", "alerts: {webhookURL: 'https://h.example.com:8443/XXXXPATH'}\n" + on + "}", "alerts.webhookURL is on port 8443"},
		{"Slack on 443", "alerts: {slackWebhookURL: 'https://hooks.slack.com/services/XXXXPATH'}\n" + on + "}", ""},
		{"no receivers rule at all", "alerts: {heartbeatURL: 'https://hc-ping.com/XXXXPATH'}\n" + on + ", alertReceivers: {cidrs: []}}", "alerts.heartbeatURL is on port 443"},
		{"Alertmanager on http's 80", "alerts: {alertmanagerURLs: ['http://am.monitoring']}\n" + on + "}", "alerts.alertmanagerURLs[0] is on port 80"},
		{"the policy off", "alerts: {alertmanagerURLs: ['http://alertmanager.monitoring:9093']}", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := renderErr(t, c.values)
			switch {
			case c.fails == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.fails != "" && (err == nil || !strings.Contains(err.Error(), c.fails)):
				t.Fatalf("err %v, want it to name %q\n%.300s", err, c.fails, out)
			case err != nil && (strings.Contains(err.Error(), "XXXXPATH") || strings.Contains(err.Error(), "alertmanager.monitoring")):
				t.Errorf("the error names the URL: %v", err)
			}
		})
	}
}
