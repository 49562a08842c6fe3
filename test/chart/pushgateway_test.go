package chart

import (
	"encoding/json"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestPushgatewayValues: monitoring.pushgateway.url makes every CronJob run push its
// metrics under the group the rules select (job = the full name, namespace = the
// release's); nothing is pushed by default or by `watchdog run`; with a
// NetworkPolicy, egress to the Pushgateway's port is allowed.
func TestPushgatewayValues(t *testing.T) {
	if env := envOf(render(t, "").cronJob().Spec.JobTemplate.Spec.Template.Spec.Containers[0]); env["WATCHDOG_PUSHGATEWAY_URL"].Value != "" {
		t.Errorf("a Pushgateway by default: %+v", env["WATCHDOG_PUSHGATEWAY_URL"])
	}
	r := render(t, "monitoring: {pushgateway: {url: 'http://pushgateway.monitoring:9091'}}")
	env := envOf(r.cronJob().Spec.JobTemplate.Spec.Template.Spec.Containers[0])
	for k, want := range map[string]string{
		"WATCHDOG_PUSHGATEWAY_URL":      "http://pushgateway.monitoring:9091",
		"WATCHDOG_PUSHGATEWAY_JOB":      fullname,
		"WATCHDOG_PUSHGATEWAY_GROUPING": "namespace=" + renderNamespace,
	} {
		if env[k].Value != want {
			t.Errorf("%s = %q, want %q", k, env[k].Value, want)
		}
	}

	policy := func(values string) *networkingv1.NetworkPolicy {
		var np networkingv1.NetworkPolicy
		render(t, "networkPolicy: {enabled: true, apiServer: {cidrs: ['10.0.0.1/32']}}\n"+values).one("NetworkPolicy", &np)
		return &np
	}
	// The Pushgateway's rule: its port alone (the API server's and the receivers'
	// rules name theirs with addresses).
	pushPort := func(np *networkingv1.NetworkPolicy, port int32) *networkingv1.NetworkPolicyEgressRule {
		for i, e := range np.Spec.Egress {
			if len(e.Ports) == 1 && e.Ports[0].Port != nil && e.Ports[0].Port.IntVal == port && (len(e.To) == 0 || e.To[0].IPBlock == nil) {
				return &np.Spec.Egress[i]
			}
		}
		return nil
	}
	if pushPort(policy(""), 9091) != nil {
		t.Error("egress to 9091 without a Pushgateway")
	}
	for url, port := range map[string]int32{"http://pushgateway.monitoring:9091": 9091, "https://pg.example.com": 443, "http://pg.monitoring": 80} {
		e := pushPort(policy("monitoring: {pushgateway: {url: '"+url+"'}}"), port)
		if e == nil || len(e.To) != 0 {
			t.Errorf("%s: egress %+v, want port %d to anywhere", url, e, port)
		}
	}
	e := pushPort(policy("monitoring: {pushgateway: {url: 'http://pg.monitoring:9091'}}\nnetworkPolicy: {enabled: true, apiServer: {cidrs: ['10.0.0.1/32']}, pushgatewayTo: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}}]}"), 9091)
	if e == nil || len(e.To) != 1 || e.To[0].NamespaceSelector == nil {
		t.Errorf("networkPolicy.pushgatewayTo not applied: %+v", e)
	}

	for _, c := range []struct{ values, want string }{
		{"monitoring: {pushgateway: {url: 'pushgateway:9091'}}", "url"},
		{"monitoring: {pushgateway: {url: 'http://user:pw@pg:9091'}}", "url"},
		{"mode: deployment\nmonitoring: {pushgateway: {url: 'http://pg:9091'}}", "monitoring.pushgateway.url is for mode cronjob"},
	} {
		if out, err := renderErr(t, c.values); err == nil || !strings.Contains(out+err.Error(), c.want) {
			t.Errorf("%s: rendered (err %v), want a failure naming %s:\n%.300s", c.values, err, c.want, out)
		}
	}
}

// TestServiceMonitorScrapesTheService: the ServiceMonitor option scrapes the chart's
// metrics Service, whose selector picks the Deployment's pods, with the job label
// and honorLabels the rules need; it and the PodMonitor exclude each other.
func TestServiceMonitorScrapesTheService(t *testing.T) {
	apis := append([]string{"--api-versions", "monitoring.coreos.com/v1/ServiceMonitor"}, operatorAPIs...)
	if n := len(render(t, "mode: deployment\ndeployment: {service: {enabled: true}}", apis...).kinds("ServiceMonitor")); n != 0 {
		t.Fatalf("a ServiceMonitor by default (%d)", n)
	}
	r := render(t, "mode: deployment\ndeployment: {service: {enabled: true}}\nmonitoring: {serviceMonitor: {enabled: true, labels: {release: kps}}}", apis...)
	sms := r.kinds("ServiceMonitor")
	if len(sms) != 1 {
		t.Fatalf("%d ServiceMonitors, want 1", len(sms))
	}
	sm := sms[0]
	svc := r.kinds("Service")
	if len(svc) != 1 {
		t.Fatalf("%d Services", len(svc))
	}
	sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	svcLabels := svc[0].GetLabels()
	for k, v := range sel {
		if svcLabels[k] != v {
			t.Errorf("the ServiceMonitor selects %s=%s; the Service's labels are %v", k, v, svcLabels)
		}
	}
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	ports, _, _ := unstructured.NestedSlice(svc[0].Object, "spec", "ports")
	if len(eps) != 1 || len(ports) != 1 {
		t.Fatalf("endpoints %v, Service ports %v", eps, ports)
	}
	ep := eps[0].(map[string]any)
	relabel, _ := json.Marshal(ep["relabelings"])
	if ep["port"] != ports[0].(map[string]any)["name"] || ep["path"] != "/metrics" || ep["honorLabels"] != true ||
		!strings.Contains(string(relabel), `"replacement":"`+fullname+`","targetLabel":"job"`) {
		t.Errorf("endpoint %v (relabelings %s), Service port %v", ep, relabel, ports[0])
	}
	if sm.GetLabels()["release"] != "kps" {
		t.Errorf("monitoring.serviceMonitor.labels not applied: %v", sm.GetLabels())
	}
	if n := len(render(t, "monitoring: {serviceMonitor: {enabled: true}}", apis...).kinds("ServiceMonitor")); n != 0 {
		t.Errorf("a ServiceMonitor in cronjob mode (%d)", n)
	}
	for _, c := range []struct{ values, want string }{
		{"mode: deployment\ndeployment: {service: {enabled: true}}\nmonitoring: {serviceMonitor: {enabled: true}, podMonitor: {enabled: true}}", "scrape every watchdog twice"},
		{"mode: deployment\nmonitoring: {serviceMonitor: {enabled: true}}", "deployment.service.enabled"},
	} {
		if out, err := renderErr(t, c.values, apis...); err == nil || !strings.Contains(out+err.Error(), c.want) {
			t.Errorf("%s: rendered (err %v), want a failure naming %q", c.values, err, c.want)
		}
	}
}
