// Package restart carries out a restart the decision core asked for, touching only the observed pod.
package restart

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agentenv/watchdog/pkg/kube"
	"k8s.io/utils/ptr"
)

// Restarter restarts one scheduler pod.
type Restarter interface {
	// Restart acts on the pod named name with UID uid.
	Restart(ctx context.Context, name, uid string) (Result, error)
	Method() string
}

// Result says what happened.
type Result struct {
	Gone   bool // the pod was already gone: someone else restarted it, that counts as done
	Detail string
	At     time.Time // the restart's time by the API server's clock (zero: unknown)
}

// Deleter deletes the pod with its own grace period and a UID precondition: never a
// replacement that took its name.
type Deleter struct {
	Client    *kube.Client
	Namespace string
}

func (d Deleter) Method() string { return "delete" }

func (d Deleter) Restart(ctx context.Context, name, uid string) (Result, error) {
	opts := metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(uid)}
	pod, err := d.Client.DeletePod(ctx, d.Namespace, name, opts)
	switch {
	case err == nil:
		res := Result{Detail: fmt.Sprintf("deleted pod %s/%s (uid %s)", d.Namespace, name, uid)}
		if pod != nil && pod.DeletionTimestamp != nil {
			// deletionTimestamp is the delete's time plus the grace period.
			res.At = pod.DeletionTimestamp.Add(-time.Duration(ptr.Deref(pod.DeletionGracePeriodSeconds, 0)) * time.Second)
		}
		return res, nil
	case apierrors.IsNotFound(err):
		return Result{Gone: true, Detail: fmt.Sprintf("pod %s/%s already gone", d.Namespace, name)}, nil
	case apierrors.IsConflict(err):
		// The UID precondition failed: the name now belongs to another pod, so ours is gone.
		return Result{Gone: true, Detail: fmt.Sprintf("pod %s/%s uid %s already replaced", d.Namespace, name, uid)}, nil
	default:
		return Result{}, fmt.Errorf("delete pod %s/%s: %w", d.Namespace, name, err)
	}
}

// RestartedAtAnnotation is what `kubectl rollout restart` sets on the pod template.
const RestartedAtAnnotation = "kubectl.kubernetes.io/restartedAt"

// Rollout restarts the Deployment as `kubectl rollout restart` does (surge and availability rules apply).
type Rollout struct {
	Client     *kube.Client
	Namespace  string
	Deployment string
	Now        func() time.Time
}

func (r Rollout) Method() string { return "rollout" }

func (r Rollout) Restart(ctx context.Context, name, uid string) (Result, error) {
	at := r.Now().UTC().Format(time.RFC3339)
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{%q:%q}}}}}`, RestartedAtAnnotation, at)
	d, err := r.Client.PatchDeployment(ctx, r.Namespace, r.Deployment, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "watchdog"})
	if err != nil {
		return Result{}, fmt.Errorf("patch Deployment %s/%s with %s: %w", r.Namespace, r.Deployment, RestartedAtAnnotation, err)
	}
	res := Result{Detail: fmt.Sprintf("rollout restart of Deployment %s/%s requested at %s (for pod %s)", r.Namespace, r.Deployment, at, name)}
	for _, f := range d.ManagedFields {
		if f.Manager == "watchdog" && f.Time != nil { // the API server's time of the patch
			res.At = f.Time.Time
		}
	}
	return res, nil
}
