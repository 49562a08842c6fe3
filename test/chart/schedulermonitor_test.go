package chart

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// TestSchedulerPodMonitor: the PodMonitor for the scheduler's own metrics (what
// `watchdog backtest` replays) is off by default and needs the CRD; on, in any
// mode, it selects scheduler.selector's pods in scheduler.namespace, keeps the
// scheduler container and scrapes scheduler.metricsPort on it (AgentENV does not
// declare that port, so the PodMonitor cannot name it); the API server's strict
// validation against the Prometheus Operator's CRD accepts it.
func TestSchedulerPodMonitor(t *testing.T) {
	const on = "monitoring: {schedulerPodMonitor: {enabled: true, labels: {release: kps}}}\n"
	for _, tc := range []struct {
		name, values string
		apis         []string
		want         int
	}{
		{"default", "", operatorAPIs, 0},
		{"enabled, no CRD", on, nil, 0},
		{"enabled, cronjob mode", on, operatorAPIs, 1},
		{"enabled, deployment mode", on + "mode: deployment", operatorAPIs, 1},
	} {
		if got := len(schedulerMonitors(render(t, tc.values, tc.apis...))); got != tc.want {
			t.Errorf("%s: %d scheduler PodMonitors, want %d", tc.name, got, tc.want)
		}
	}
	pm := schedulerMonitors(render(t, on+"scheduler: {namespace: sched-ns, metricsPort: 9200, container: sched, selector: 'app.kubernetes.io/name=agentenv-scheduler'}", operatorAPIs...))[0]
	sel, _ := json.Marshal(pm.Object["spec"].(map[string]any)["selector"])
	if !strings.Contains(string(sel), `"key":"app.kubernetes.io/name","operator":"In","values":["agentenv-scheduler"]`) {
		t.Errorf("selector %s, want scheduler.selector's (AgentENV's pod label)", sel)
	}
	ns, _, _ := unstructured.NestedStringSlice(pm.Object, "spec", "namespaceSelector", "matchNames")
	if !slices.Equal(ns, []string{"sched-ns"}) || pm.GetLabels()["release"] != "kps" {
		t.Errorf("namespaces %v, labels %v: want scheduler.namespace and monitoring.schedulerPodMonitor.labels", ns, pm.GetLabels())
	}
	eps, _, _ := unstructured.NestedSlice(pm.Object, "spec", "podMetricsEndpoints")
	relabel, _ := json.Marshal(eps[0].(map[string]any)["relabelings"])
	for _, want := range []string{`"action":"keep","regex":"sched","sourceLabels":["__meta_kubernetes_pod_container_name"]`, `"replacement":"${1}:9200","sourceLabels":["__address__"],"targetLabel":"__address__"`} {
		if !strings.Contains(string(relabel), want) {
			t.Errorf("relabelings %s lack %s", relabel, want)
		}
	}

	crds := tool(t, "PROMETHEUS_OPERATOR_CRDS", "prometheus-operator-crds.sh")
	_, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: []string{crds}, ErrorIfPathMissing: true})
	must(t, err)
	dyn, err := dynamic.NewForConfig(env.Config)
	must(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns0, err := env.CreateNamespace(ctx, "schedmon")
	must(t, err)
	pm.SetNamespace(ns0)
	if err := dryRunCreate(ctx, dyn, podMonitorGVR, pm); err != nil {
		t.Errorf("the API server refuses the scheduler PodMonitor: %v", err)
	}
}

func schedulerMonitors(r *rendered) []*unstructured.Unstructured {
	return slices.DeleteFunc(r.kinds("PodMonitor"), func(o *unstructured.Unstructured) bool { return o.GetName() != fullname+"-scheduler" })
}
