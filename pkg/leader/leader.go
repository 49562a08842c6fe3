// Package leader elects one watchdog among replicas with a coordination.k8s.io
// Lease, so that `watchdog run` with replicas > 1 acts from one place.
//
// It is client-go's leaderelection algorithm (observed-time expiry: no two nodes'
// clocks compared; optimistic concurrency; release on shutdown) over pkg/kube:
// client-go's package imports the generated clientset (pkg/kube says the cost).
package leader

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/rs/zerolog"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/agentenv/watchdog/pkg/kube"
)

// Elector runs an election. Unset durations get client-go's defaults (15 s, 10 s, 2 s).
type Elector struct {
	Namespace, Name, Identity string
	// LeaseDuration: followers' wait after the last observed renewal; RenewDeadline:
	// how long the leader tries to renew; RetryPeriod: the pause between attempts.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration

	Client *kube.Client
	Clock  clock.Clock
	Log    zerolog.Logger
	// OnAttempt, if set, is called after every acquire or renew attempt (health).
	OnAttempt func(leading bool)

	observed     *coordinationv1.Lease
	observedTime time.Time
}

// Run campaigns until ctx ends, calling lead on each win with a context cancelled when leadership
// is lost, and waiting for it. On ctx's end a held Lease is released: others need not wait for its expiry.
func (e *Elector) Run(ctx context.Context, lead func(ctx context.Context)) error {
	if err := e.defaults(); err != nil {
		return err
	}
	for ctx.Err() == nil {
		if ok, _ := e.attempt(ctx); !ok {
			select {
			case <-ctx.Done():
			case <-e.Clock.After(wait.Jitter(e.RetryPeriod, 1.2)):
			}
			continue
		}
		e.Log.Info().Str("lease", e.Name).Str("identity", e.Identity).Msg("became leader")
		e.hold(ctx, lead)
		if ctx.Err() != nil {
			e.release()
			break
		}
		e.Log.Warn().Str("lease", e.Name).Msg("lost leadership; campaigning again")
	}
	return nil
}

func (e *Elector) defaults() error {
	e.LeaseDuration = cmp.Or(e.LeaseDuration, 15*time.Second)
	e.RenewDeadline = cmp.Or(e.RenewDeadline, 10*time.Second)
	e.RetryPeriod = cmp.Or(e.RetryPeriod, 2*time.Second)
	if e.RenewDeadline >= e.LeaseDuration || e.RetryPeriod >= e.RenewDeadline {
		return fmt.Errorf("leader election: want retry period < renew deadline < lease duration, got %s, %s, %s", e.RetryPeriod, e.RenewDeadline, e.LeaseDuration)
	}
	return nil
}

// Hold runs one pass holding the Lease (tried for up to wait, renewed as by hold, released after):
// not held when another kept it for all of wait (or until ctx ended); err when it could not be read or written.
func (e *Elector) Hold(ctx context.Context, wait time.Duration, pass func(ctx context.Context)) (held bool, err error) {
	if err = e.defaults(); err != nil {
		return false, err
	}
	until := e.Clock.Now().Add(wait)
	for {
		if held, err = e.attempt(ctx); held {
			break
		}
		left := until.Sub(e.Clock.Now())
		switch {
		case err != nil && !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err):
			return false, fmt.Errorf("take Lease %s/%s: %w", e.Namespace, e.Name, err)
		case left <= 0:
			return false, nil
		}
		select {
		case <-ctx.Done(): // shut down, or the pass's deadline came first: not held
			return false, nil
		case <-e.Clock.After(min(e.RetryPeriod, max(left, time.Millisecond))):
		}
	}
	e.hold(ctx, pass)
	e.release()
	return true, nil
}

// hold runs f while renewing the Lease, cancelling f's context when renewal fails
// for RenewDeadline (another may take the Lease), and stops renewing once f returns.
func (e *Elector) hold(ctx context.Context, f func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(ctx)
	var renewing sync.WaitGroup
	renewing.Go(func() {
		e.renew(ctx)
		cancel()
	})
	f(ctx)
	cancel()
	renewing.Wait()
}

// Holder is the Lease's holder as last read ("" when none).
func (e *Elector) Holder() string {
	if e.observed == nil {
		return ""
	}
	return ptr.Deref(e.observed.Spec.HolderIdentity, "")
}

// renew keeps the Lease until a renewal fails for RenewDeadline or ctx ends.
func (e *Elector) renew(ctx context.Context) {
	lastRenew := e.Clock.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.Clock.After(e.RetryPeriod):
		}
		// As client-go, RenewDeadline counts from the last success, not each attempt: a
		// hanging attempt must not keep this instance leading past LeaseDuration.
		left := e.RenewDeadline - e.Clock.Since(lastRenew)
		if left <= 0 {
			return
		}
		attemptCtx, cancel := context.WithTimeout(ctx, left)
		ok, _ := e.attempt(attemptCtx)
		cancel()
		if ok {
			lastRenew = e.Clock.Now()
			continue
		}
		if e.Clock.Since(lastRenew) >= e.RenewDeadline {
			return
		}
	}
}

// attempt takes the Lease if it is free, expired or ours, and reports to OnAttempt.
func (e *Elector) attempt(ctx context.Context) (ok bool, err error) {
	if e.OnAttempt != nil {
		defer func() { e.OnAttempt(ok) }()
	}
	now := metav1.NewMicroTime(e.Clock.Now())
	seconds := int32(e.LeaseDuration / time.Second)
	lease, err := e.Client.GetLease(ctx, e.Namespace, e.Name)
	write, verb := e.Client.UpdateLease, "update"
	switch {
	case apierrors.IsNotFound(err):
		write, verb = e.Client.CreateLease, "create"
		lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: e.Name, Namespace: e.Namespace,
			Labels: map[string]string{"app.kubernetes.io/managed-by": kube.ManagedBy}}}
	case err != nil:
		e.Log.Warn().Err(err).Str("lease", e.Name).Msg("read leader Lease")
		return false, err
	case e.observed == nil || e.observed.ResourceVersion != lease.ResourceVersion:
		e.observed, e.observedTime = lease, e.Clock.Now()
	}
	holder := ptr.Deref(lease.Spec.HolderIdentity, "")
	// A duration longer than ours is not trusted: a writer could hold the Lease for a year.
	theirs := time.Duration(ptr.Deref(lease.Spec.LeaseDurationSeconds, math.MaxInt32)) * time.Second
	duration := min(e.LeaseDuration, theirs)
	if holder != "" && holder != e.Identity && e.Clock.Since(e.observedTime) < duration {
		return false, nil // someone else holds a lease that has not expired
	}
	update := lease.DeepCopy()
	if holder != e.Identity {
		update.Spec.AcquireTime = &now
		if lease.ResourceVersion != "" { // a takeover; a Lease being created starts with none
			update.Spec.LeaseTransitions = ptr.To(ptr.Deref(lease.Spec.LeaseTransitions, 0) + 1)
		}
	}
	update.Spec.HolderIdentity = &e.Identity
	update.Spec.RenewTime = &now
	update.Spec.LeaseDurationSeconds = &seconds
	written, err := write(ctx, update)
	if err != nil {
		e.Log.Debug().Err(err).Msg(verb + " leader Lease")
		return false, err
	}
	e.observed, e.observedTime = written, e.Clock.Now()
	return true, nil
}

// release gives the Lease up as client-go's ReleaseOnCancel does (no holder, one second).
func (e *Elector) release() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lease, err := e.Client.GetLease(ctx, e.Namespace, e.Name)
	if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != e.Identity {
		return
	}
	now := metav1.NewMicroTime(e.Clock.Now())
	lease.Spec.HolderIdentity, lease.Spec.LeaseDurationSeconds, lease.Spec.RenewTime = ptr.To(""), ptr.To(int32(1)), &now
	if _, err := e.Client.UpdateLease(ctx, lease); err != nil {
		e.Log.Warn().Err(err).Msg("release leader Lease")
		return
	}
	e.Log.Info().Str("lease", e.Name).Msg("released leadership")
}
