package kube

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NamespaceMissing says whether namespace ns does not exist, by a server-side dry run
// of an Event there (reading a namespace takes a cluster-wide grant): only the
// namespace's NotFound is "missing", no other answer. Nothing is stored.
func NamespaceMissing(ctx context.Context, c *Client, ns string) bool {
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{GenerateName: "watchdog-", Namespace: ns},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "watchdog"}, Reason: "Check", Type: corev1.EventTypeNormal}
	opts := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	err := c.core.Post().Namespace(ns).Resource("events").VersionedParams(&opts, params).Body(ev).Do(ctx).Error()
	var st apierrors.APIStatus
	return apierrors.IsNotFound(err) && errors.As(err, &st) && st.Status().Details != nil && st.Status().Details.Kind == "namespaces"
}
