package observe

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/kube"
)

// ownerChains reads each live pod's controlling ReplicaSet (once per name) and checks
// the chain by UID (VerifyChain): anyone who can create a pod can forge names, UIDs
// come from the API server. A pod copying a genuine reference, UID included, passes:
// the ReplicaSet controller treats it as its own, so a rollout does replace it.
func (o *Observer) ownerChains(ctx context.Context, d *appsv1.Deployment, pods []decide.Pod, get func(ctx context.Context, name string) (*appsv1.ReplicaSet, error)) (map[string]decide.OwnerChain, error) {
	out := make(map[string]decide.OwnerChain, len(pods))
	type read struct {
		rs  *appsv1.ReplicaSet
		err error
	}
	cache := map[string]read{}
	var firstErr error
	for _, p := range pods {
		if !decide.Live(p) {
			continue // never judged: nothing to restart
		}
		if p.ControllerKind != "ReplicaSet" || p.ControllerName == "" {
			out[p.UID] = chainFailed("pod %s is not controlled by a ReplicaSet (controller: %q %q)", p.Name, p.ControllerKind, p.ControllerName)
			continue
		}
		got, ok := cache[p.ControllerName]
		if !ok {
			got.rs, got.err = get(ctx, p.ControllerName)
			cache[p.ControllerName] = got
		}
		switch {
		case apierrors.IsNotFound(got.err):
			out[p.UID] = chainFailed("ReplicaSet %s named by pod %s's controller reference does not exist", p.ControllerName, p.Name)
		case got.err != nil:
			if firstErr == nil {
				firstErr = fmt.Errorf("get ReplicaSet %s/%s: %w", o.Namespace, p.ControllerName, got.err)
			}
			out[p.UID] = chainFailed("cannot read ReplicaSet %s of pod %s: %v", p.ControllerName, p.Name, got.err)
		default:
			out[p.UID] = VerifyChain(p, got.rs, d)
		}
	}
	return out, firstErr
}

// Ownership reads which pods the scheduler Deployment runs, by UID, for
// decide.JudgeDeployment. Only live pods naming one of its ReplicaSets cost a read,
// and none when they name more than --max-pods: a flood of pods is no flood of reads.
func (o *Observer) Ownership(ctx context.Context, pods []decide.Pod) *decide.Ownership {
	d, err := o.cachedDeployment(ctx)
	return o.ownership(ctx, d, err, pods)
}

// ownership is Ownership with the Deployment read (d, err). Judging by selector, it
// reads only the annotations (the pause): unread (nil) on an error, no error of the run's.
func (o *Observer) ownership(ctx context.Context, d *appsv1.Deployment, err error, pods []decide.Pod) *decide.Ownership {
	own, chains := &decide.Ownership{Deployment: o.Deployment}, o.Reads.JudgePods == decide.JudgeDeployment
	switch {
	case apierrors.IsNotFound(err):
		return own
	case err != nil && !chains:
		return nil
	case err != nil:
		own.Err = fmt.Errorf("get Deployment %s/%s: %w", o.Namespace, o.Deployment, err)
		return own
	}
	if own.Found, own.Annotations = true, d.Annotations; !chains {
		return own
	}
	var named []decide.Pod
	replicaSets := map[string]bool{}
	for _, p := range pods {
		if decide.Live(p) && decide.OwnedByName(p, o.Deployment) {
			named = append(named, p)
			replicaSets[p.ControllerName] = true
		}
	}
	if o.Reads.MaxPods > 0 && len(replicaSets) > o.Reads.MaxPods {
		own.Chains = make(map[string]decide.OwnerChain, len(named))
		for _, p := range named {
			own.Chains[p.UID] = chainFailed("not checked: the pods name %d ReplicaSets of Deployment %s, more than --max-pods %d",
				len(replicaSets), o.Deployment, o.Reads.MaxPods)
		}
		return own
	}
	own.Chains, own.Err = o.ownerChains(ctx, d, named, func(ctx context.Context, name string) (*appsv1.ReplicaSet, error) {
		return cached(o, "replicaset/"+name, func() (*appsv1.ReplicaSet, error) {
			return o.Client.GetReplicaSet(ctx, o.Namespace, name, kube.Cached)
		})
	})
	return own
}

// ownersTTL is how long the objects read for Ownership (watch cache) are reused, sparing each sample
// two round trips: UIDs change only on recreation, a pod naming a recreated ReplicaSet waits for the
// next read, and the rollout gate reads the chain afresh.
const ownersTTL = time.Minute

// cachedRead is an object read for Ownership, kept by key ("deployment", "replicaset/<name>").
type cachedRead struct {
	obj  any
	read time.Time
}

// cached returns the object under key, calling read unless one younger than ownersTTL is kept.
func cached[T any](o *Observer, key string, read func() (*T, error)) (*T, error) {
	now := o.Clock.Now()
	if v, ok := o.owners.Load(key); ok {
		if hit := v.(cachedRead); now.Sub(hit.read) < ownersTTL && !now.Before(hit.read) {
			return hit.obj.(*T), nil
		}
	}
	obj, err := read()
	if err != nil {
		return nil, err // failures are not kept
	}
	o.owners.Store(key, cachedRead{obj: obj, read: now})
	return obj, nil
}

// cachedDeployment is the scheduler Deployment for Ownership (ownersTTL).
func (o *Observer) cachedDeployment(ctx context.Context) (*appsv1.Deployment, error) {
	return cached(o, "deployment", func() (*appsv1.Deployment, error) {
		return o.Client.GetDeployment(ctx, o.Namespace, o.Deployment, kube.Cached)
	})
}

// VerifyChain checks a pod's chain to the ReplicaSet it names and the Deployment, as read.
func VerifyChain(p decide.Pod, rs *appsv1.ReplicaSet, d *appsv1.Deployment) decide.OwnerChain {
	if string(rs.UID) != p.ControllerUID {
		return chainFailed("pod %s names ReplicaSet %s with uid %q, but ReplicaSet %s has uid %q", p.Name, p.ControllerName, p.ControllerUID, rs.Name, rs.UID)
	}
	owner := metav1.GetControllerOf(rs)
	if owner == nil {
		return chainFailed("ReplicaSet %s (of pod %s) has no controller", rs.Name, p.Name)
	}
	if gv, err := schema.ParseGroupVersion(owner.APIVersion); err != nil || owner.Kind != "Deployment" || gv.Group != appsv1.GroupName {
		return chainFailed("ReplicaSet %s (of pod %s) is controlled by %s %s %q, not by a Deployment", rs.Name, p.Name, owner.APIVersion, owner.Kind, owner.Name)
	}
	if owner.Name != d.Name {
		return chainFailed("ReplicaSet %s (of pod %s) is controlled by Deployment %q, not %q", rs.Name, p.Name, owner.Name, d.Name)
	}
	if owner.UID != d.UID {
		return chainFailed("ReplicaSet %s (of pod %s) names Deployment %s with uid %q, but Deployment %s has uid %q", rs.Name, p.Name, owner.Name, owner.UID, d.Name, d.UID)
	}
	return decide.OwnerChain{Verified: true, ReplicaSetUID: p.ControllerUID, Detail: fmt.Sprintf("pod %s → ReplicaSet %s (uid %s) → Deployment %s (uid %s)", p.Name, rs.Name, rs.UID, d.Name, d.UID)}
}

func chainFailed(format string, a ...any) decide.OwnerChain {
	return decide.OwnerChain{Detail: fmt.Sprintf(format, a...)}
}
