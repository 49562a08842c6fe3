package chart

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestCanaryPolicy: with probe.mode canary, the chart's ServiceAccount, on the real
// API server, may create, read and delete its canary EndpointSlice of the right
// shape, and nothing else: another name, a schedulable (non-terminating)
// endpoint, two endpoints, another port or no owner label are denied by the
// policy; another EndpointSlice cannot be read or deleted (RBAC). In list mode it
// writes no EndpointSlice at all.
func TestCanaryPolicy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns, err := env.CreateNamespace(ctx, "chart-canary")
	must(t, err)
	installChart(t, ns, release, "probe: {mode: canary}\n")
	_, sa := saKubeconfig(t, ns, fullname)
	yes, no, port := true, false, int32(8000)
	canary := func(name string, change func(*discoveryv1.EndpointSlice)) *discoveryv1.EndpointSlice {
		s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{
			discoveryv1.LabelServiceName: "agentenv-nodes", "app.kubernetes.io/managed-by": "agentenv-scheduler-watchdog"}},
			AddressType: discoveryv1.AddressTypeIPv4, Ports: []discoveryv1.EndpointPort{{Port: &port}},
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"198.18.0.9"}, Conditions: discoveryv1.EndpointConditions{Ready: &no, Serving: &yes, Terminating: &yes},
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "agentenv-scheduler-watchdog-probe-1"}}}}
		if change != nil {
			change(s)
		}
		return s
	}
	create := func(s *discoveryv1.EndpointSlice) error {
		_, err := sa.DiscoveryV1().EndpointSlices(ns).Create(ctx, s, metav1.CreateOptions{DryRun: dryRunAll})
		return err
	}
	const name = "agentenv-scheduler-watchdog-probe"
	if err := waitDenied(t, "the policy to deny a schedulable canary", func() error {
		return create(canary(name, func(s *discoveryv1.EndpointSlice) { s.Endpoints[0].Conditions.Terminating = &no }))
	}); !strings.Contains(err.Error(), "exactly one endpoint, serving and terminating") {
		t.Fatalf("a non-terminating canary: %v", err)
	}
	for what, s := range map[string]*discoveryv1.EndpointSlice{
		"another name":       canary("agentenv-nodes-x", nil),
		"no owner label":     canary(name, func(s *discoveryv1.EndpointSlice) { delete(s.Labels, "app.kubernetes.io/managed-by") }),
		"another service":    canary(name, func(s *discoveryv1.EndpointSlice) { s.Labels[discoveryv1.LabelServiceName] = "other" }),
		"two endpoints":      canary(name, func(s *discoveryv1.EndpointSlice) { s.Endpoints = append(s.Endpoints, s.Endpoints[0]) }),
		"another port":       canary(name, func(s *discoveryv1.EndpointSlice) { p := int32(9000); s.Ports[0].Port = &p }),
		"terminating unsaid": canary(name, func(s *discoveryv1.EndpointSlice) { s.Endpoints[0].Conditions.Terminating = nil }),
	} {
		if err := create(s); !apierrors.IsForbidden(err) {
			t.Errorf("%s: %v, want Forbidden", what, err)
		}
	}
	// The right one: created, read back, deleted, for real.
	created, err := sa.DiscoveryV1().EndpointSlices(ns).Create(ctx, canary(name, nil), metav1.CreateOptions{})
	must(t, err)
	if _, err := sa.DiscoveryV1().EndpointSlices(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
		t.Errorf("read back: %v", err)
	}
	must(t, sa.DiscoveryV1().EndpointSlices(ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &created.UID}}))
	// The controller's slices: neither read by name nor deleted.
	if err := sa.DiscoveryV1().EndpointSlices(ns).Delete(ctx, "agentenv-nodes-0", metav1.DeleteOptions{DryRun: dryRunAll}); !apierrors.IsForbidden(err) {
		t.Errorf("delete of the nodes' slice: %v, want Forbidden", err)
	}

	// list mode: no EndpointSlice write at all.
	ns2, err := env.CreateNamespace(ctx, "chart-list")
	must(t, err)
	installChart(t, ns2, release, "")
	_, sa2 := saKubeconfig(t, ns2, fullname)
	c := canary(name, nil)
	c.Namespace = ns2
	if _, err := sa2.DiscoveryV1().EndpointSlices(ns2).Create(ctx, c, metav1.CreateOptions{DryRun: dryRunAll}); !apierrors.IsForbidden(err) {
		t.Errorf("list mode: creating a canary got %v, want Forbidden", err)
	}
}
