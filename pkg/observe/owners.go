package observe

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/agentenv/watchdog/pkg/decide"
)

// ownerChains reads, for each live pod controlled by a ReplicaSet, that ReplicaSet
// by the name its controller reference gives, and checks the chain by UID: the
// ReplicaSet read must have the UID the pod names, and its own controller must be
// the Deployment d (kind, name and UID as read). Names alone can be forged by
// anyone who can create a pod or a ReplicaSet; UIDs are assigned by the API server.
//
// A pod that copies a genuine ReplicaSet's reference, UID included, passes: to the
// ReplicaSet controller it is then one of that ReplicaSet's pods (adopted or
// released by selector), so rolling the Deployment does replace it.
//
// Each ReplicaSet is read once per call (the pods of one Deployment share it), and
// the call is made only when a restart is due, for at most --max-pods pods.
func (o *Observer) ownerChains(ctx context.Context, d *appsv1.Deployment, pods []decide.Pod) (map[string]decide.OwnerChain, error) {
	out := make(map[string]decide.OwnerChain, len(pods))
	type read struct {
		rs  *appsv1.ReplicaSet
		err error
	}
	cache := map[string]read{}
	var firstErr error
	for _, p := range pods {
		if p.Terminating || p.Phase == "Failed" || p.Phase == "Succeeded" {
			continue // never judged: nothing to restart
		}
		if p.ControllerKind != "ReplicaSet" || p.ControllerName == "" {
			out[p.UID] = decide.OwnerChain{Detail: fmt.Sprintf("pod %s is not controlled by a ReplicaSet (controller: %q %q)", p.Name, p.ControllerKind, p.ControllerName)}
			continue
		}
		got, ok := cache[p.ControllerName]
		if !ok {
			got.rs, got.err = o.Client.GetReplicaSet(ctx, o.Namespace, p.ControllerName)
			cache[p.ControllerName] = got
		}
		switch {
		case apierrors.IsNotFound(got.err):
			out[p.UID] = decide.OwnerChain{Detail: fmt.Sprintf("ReplicaSet %s named by pod %s's controller reference does not exist", p.ControllerName, p.Name)}
		case got.err != nil:
			err := fmt.Errorf("get ReplicaSet %s/%s: %w", o.Namespace, p.ControllerName, got.err)
			if firstErr == nil {
				firstErr = err
			}
			out[p.UID] = decide.OwnerChain{Detail: fmt.Sprintf("cannot read ReplicaSet %s of pod %s: %v", p.ControllerName, p.Name, got.err)}
		default:
			out[p.UID] = VerifyChain(p, got.rs, d)
		}
	}
	return out, firstErr
}

// VerifyChain checks one pod's chain given the ReplicaSet its controller
// reference names and the Deployment, both as read from the API server.
func VerifyChain(p decide.Pod, rs *appsv1.ReplicaSet, d *appsv1.Deployment) decide.OwnerChain {
	fail := func(format string, a ...any) decide.OwnerChain {
		return decide.OwnerChain{Detail: fmt.Sprintf(format, a...)}
	}
	if string(rs.UID) != p.ControllerUID {
		return fail("pod %s names ReplicaSet %s with uid %q, but ReplicaSet %s has uid %q", p.Name, p.ControllerName, p.ControllerUID, rs.Name, rs.UID)
	}
	owner := metav1.GetControllerOf(rs)
	if owner == nil {
		return fail("ReplicaSet %s (of pod %s) has no controller", rs.Name, p.Name)
	}
	if gv, err := schema.ParseGroupVersion(owner.APIVersion); err != nil || owner.Kind != "Deployment" || gv.Group != appsv1.GroupName {
		return fail("ReplicaSet %s (of pod %s) is controlled by %s %s %q, not by a Deployment", rs.Name, p.Name, owner.APIVersion, owner.Kind, owner.Name)
	}
	if owner.Name != d.Name {
		return fail("ReplicaSet %s (of pod %s) is controlled by Deployment %q, not %q", rs.Name, p.Name, owner.Name, d.Name)
	}
	if owner.UID != d.UID {
		return fail("ReplicaSet %s (of pod %s) names Deployment %s with uid %q, but Deployment %s has uid %q", rs.Name, p.Name, owner.Name, owner.UID, d.Name, d.UID)
	}
	return decide.OwnerChain{Verified: true, ReplicaSetUID: p.ControllerUID, Detail: fmt.Sprintf("pod %s → ReplicaSet %s (uid %s) → Deployment %s (uid %s)", p.Name, rs.Name, rs.UID, d.Name, d.UID)}
}

// DefaultMaxScrapes is how many pods are scraped at once: enough for an HA
// scheduler's replicas in one round, few enough that a selector matching many pods
// does not open a connection to each at the same instant.
const DefaultMaxScrapes = 4

func (o *Observer) maxScrapes() int {
	if o.MaxScrapes > 0 {
		return o.MaxScrapes
	}
	return DefaultMaxScrapes
}

// countLive counts the pods that could be judged: neither terminating nor finished
// (decide's own split).
func countLive(pods []corev1.Pod) int {
	n := 0
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodFailed && p.Status.Phase != corev1.PodSucceeded {
			n++
		}
	}
	return n
}
