// Package observe gathers what one run needs from the API server and the scheduler
// pods' metrics, and turns it into a decide.Observation.
package observe

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/endpoints"
	"github.com/agentenv/watchdog/pkg/kube"
	"github.com/agentenv/watchdog/pkg/scrape"
)

// Observer reads pods, EndpointSlices, the leader Lease and metrics.
type Observer struct {
	Client      *kube.Client
	Namespace   string
	Selector    string
	Container   string
	Endpoints   EndpointLister
	Scraper     *scrape.Scraper
	MetricsPort int
	MetricsPath string
	Deployment  string
	// Decide is the run's decision configuration, which says what to read: the
	// LeaderLease; with JudgePods decide.JudgeDeployment the Deployment and the
	// owner chains of the pods naming its ReplicaSets (Observation.Ownership),
	// at most MaxPods of them; with RestartMethod rollout each pod's chain again
	// for the rollout gate (Rollout). Only the pods decide.Judged picks are
	// scraped: exactly those Decide judges.
	Decide decide.Config
	// owners keeps the Deployment and ReplicaSets read for Ownership for a while
	// (ownersTTL): the samples of a run would read the same ones each time.
	owners ownersCache
	// MaxScrapes bounds the scrapes in flight; zero is DefaultMaxScrapes.
	MaxScrapes int
	Clock      clock.PassiveClock
	// Via is the resolved scrape path (direct or apiserver); for apiserver,
	// APIServer is the API server's URL and Scraper is a proxied scraper.
	Via       scrape.Via
	APIServer string
	// ScrapeURL overrides how a pod's metrics URL is built; nil uses
	// http://podIP:MetricsPort+MetricsPath. Tests use it to give pods distinct servers.
	ScrapeURL func(pod *corev1.Pod) string
}

// Observe lists the scheduler pods and counts expected nodes (in parallel), reads
// the leader Lease if configured, then scrapes the pods that will be judged. An
// error means the pod list itself could not be read: nothing can be judged. The
// lists come from the API server's watch cache.
func (o *Observer) Observe(ctx context.Context) (decide.Observation, error) {
	return o.observe(ctx, false)
}

// ObserveConsistent is Observe with consistent (quorum) lists, for the last look
// before a restart: the watch cache can lag most precisely during API-server trouble.
func (o *Observer) ObserveConsistent(ctx context.Context) (decide.Observation, error) {
	return o.observe(ctx, true)
}

func (o *Observer) observe(ctx context.Context, consistent bool) (decide.Observation, error) {
	// The observation time is when it began, not when the run began nor when its
	// last read came back: the pass starts samples on a fixed cadence, so the
	// wedge clock counts whole intervals however long each observation takes (a
	// slow API server), and the gauges read are up to 15 s old anyway.
	began := o.Clock.Now()
	var (
		wg          sync.WaitGroup
		pods        *corev1.PodList
		podsErr     error
		expected    endpoints.Count
		expectedErr error
		leader      *decide.Leader
		dep         *appsv1.Deployment
		depErr      error
	)
	wg.Add(2)
	go func() {
		defer wg.Done()
		opts := metav1.ListOptions{LabelSelector: o.Selector}
		if !consistent {
			opts = kube.FromCache(opts)
		}
		pods, podsErr = o.Client.ListPods(ctx, o.Namespace, opts)
	}()
	go func() {
		defer wg.Done()
		expected, expectedErr = o.Endpoints.Read(ctx, consistent)
	}()
	if o.Decide.LeaderLease != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			leader = o.readLeader(ctx)
		}()
	}
	if o.Decide.JudgePods == decide.JudgeDeployment || o.Deployment != "" {
		// Beside the pod list, not after it, and mostly from the cache: a slow
		// API server must not make each sample a round trip longer. Read for the
		// pause annotations too, which every report and alert shows.
		wg.Add(1)
		go func() {
			defer wg.Done()
			dep, depErr = o.cachedDeployment(ctx)
		}()
	}
	wg.Wait()
	if podsErr != nil {
		return decide.Observation{}, fmt.Errorf("list scheduler pods (%s) in %s: %w", o.Selector, o.Namespace, podsErr)
	}

	obs := decide.Observation{At: began, Expected: expected, ExpectedErr: expectedErr, Leader: leader, Consistent: consistent}
	obs.Annotated = annotated(o.Deployment, dep, depErr)
	obs.Pods = make([]decide.Pod, len(pods.Items))
	for i := range pods.Items {
		obs.Pods[i] = o.Describe(&pods.Items[i])
	}
	if o.Decide.JudgePods == decide.JudgeDeployment {
		obs.Ownership = o.ownership(ctx, dep, depErr, obs.Pods)
	}
	// Only the pods decide will judge, chosen as it chooses them (the Lease's
	// expiry at obs.At): standbys read 0 by design, and past --max-pods none is
	// (a selector gone wide must not become the watchdog's own fan-out).
	judged, _, _ := decide.Judged(obs, o.Decide)
	chosen := make(map[string]bool, len(judged))
	for _, p := range judged {
		chosen[p.UID] = true
	}
	var scrapes sync.WaitGroup
	slots := make(chan struct{}, o.maxScrapes())
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !chosen[obs.Pods[i].UID] {
			continue
		}
		scrapes.Add(1)
		go func(p *decide.Pod, pod *corev1.Pod) {
			defer scrapes.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			url := o.URL(pod)
			if url == "" {
				p.ScrapeErr = &scrape.Error{Kind: scrape.KindUnreachable, Err: fmt.Errorf("pod %s has no IP", pod.Name)}
				return
			}
			sample, err := o.Scraper.Scrape(ctx, url)
			if err != nil {
				p.ScrapeErr = err
				return
			}
			p.Sample = &sample
		}(&obs.Pods[i], pod)
	}
	scrapes.Wait()
	return obs, nil
}

// URL is where the observer reads a pod's metrics, or "" while the pod has no IP.
func (o *Observer) URL(pod *corev1.Pod) string {
	if o.ScrapeURL != nil {
		return o.ScrapeURL(pod)
	}
	return ScrapeURL(o.Via, o.APIServer, pod, o.MetricsPort, o.MetricsPath)
}

// ScrapeURL is the URL a pod's metrics are read from on the path via (resolved:
// direct or apiserver), or "" while the pod has no IP (the API server's proxy needs
// one too).
func ScrapeURL(via scrape.Via, apiServer string, pod *corev1.Pod, port int, path string) string {
	if via == scrape.ViaAPIServer {
		return ProxyURL(apiServer, pod, port, path)
	}
	return MetricsURL(pod, port, path)
}

// MetricsURL is where a scheduler pod serves its metrics: its IP (the scheduler's
// Service exposes only gRPC), or "" while it has none.
func MetricsURL(pod *corev1.Pod, port int, path string) string {
	if pod.Status.PodIP == "" {
		return ""
	}
	return "http://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(port)) + path
}

// ProxyURL is the same page through the API server's pod proxy:
// <apiServer>/api/v1/namespaces/<ns>/pods/<pod>:<port>/proxy<path>. apiServer may
// carry a path prefix (a cluster behind Rancher), as a kubeconfig's server can.
func ProxyURL(apiServer string, pod *corev1.Pod, port int, path string) string {
	if pod.Status.PodIP == "" {
		return ""
	}
	return strings.TrimRight(apiServer, "/") + "/api/v1/namespaces/" + url.PathEscape(pod.Namespace) +
		"/pods/" + url.PathEscape(pod.Name) + ":" + strconv.Itoa(port) + "/proxy" + path
}

// Describe turns a pod into the decision core's view. The age comes from the
// scheduler container's current run (a container restart is a fresh start), falling
// back to the pod's start time, never its creation.
func (o *Observer) Describe(pod *corev1.Pod) decide.Pod {
	p := decide.Pod{
		Name:        pod.Name,
		UID:         string(pod.UID),
		Phase:       string(pod.Status.Phase),
		Terminating: pod.DeletionTimestamp != nil,
	}
	if owner := metav1.GetControllerOf(pod); owner != nil {
		p.ControllerKind, p.ControllerName, p.ControllerUID = owner.Kind, owner.Name, string(owner.UID)
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			p.Ready = c.Status == corev1.ConditionTrue
		}
	}
	var podStart time.Time
	if pod.Status.StartTime != nil {
		podStart = pod.Status.StartTime.Time
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name != o.Container {
			continue
		}
		switch {
		case cs.State.Running != nil:
			p.Running, p.StartedAt = true, cs.State.Running.StartedAt.Time
			if p.StartedAt.IsZero() {
				p.StartedAt = podStart
			}
		case cs.State.Waiting != nil:
			p.WaitingReason = "waiting: " + cs.State.Waiting.Reason
		case cs.State.Terminated != nil:
			p.WaitingReason = "terminated: " + cs.State.Terminated.Reason
		}
		return p
	}
	// No status for the container: fall back to the pod's start.
	if pod.Status.Phase == corev1.PodRunning && !podStart.IsZero() {
		p.Running, p.StartedAt = true, podStart
	} else {
		p.WaitingReason = fmt.Sprintf("pod phase %s, no status for container %q", pod.Status.Phase, o.Container)
	}
	return p
}

func (o *Observer) readLeader(ctx context.Context) *decide.Leader {
	lease, err := o.Client.GetLease(ctx, o.Namespace, o.Decide.LeaderLease)
	if err != nil {
		return &decide.Leader{Err: fmt.Errorf("get Lease %s/%s: %w", o.Namespace, o.Decide.LeaderLease, err)}
	}
	l := &decide.Leader{}
	if lease.Spec.HolderIdentity != nil {
		l.Holder = *lease.Spec.HolderIdentity
	}
	if lease.Spec.RenewTime != nil {
		l.RenewedAt = lease.Spec.RenewTime.Time
	}
	if lease.Spec.LeaseDurationSeconds != nil {
		l.Duration = time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second
	}
	l.WrittenAt = renewalWritten(lease)
	return l
}

// renewalWritten is when the API server last wrote the Lease's renewTime, by its
// own clock: the newest time of the managedFields entries that own
// spec.renewTime (the holder's), or zero when none says. Another manager's edit
// (a label) is not a renewal.
func renewalWritten(lease *coordinationv1.Lease) time.Time {
	var at time.Time
	for _, m := range lease.ManagedFields {
		if m.Time == nil || m.FieldsV1 == nil || !bytes.Contains(m.FieldsV1.GetRawBytes(), []byte(`"f:renewTime"`)) {
			continue
		}
		if m.Time.After(at) {
			at = m.Time.Time
		}
	}
	return at
}

// Rollout reads the scheduler Deployment for the rollout gate. A missing Deployment
// is not an error (the pod may be managed otherwise); any other failure is, and the
// gate fails safe on it. For the rollout method, it also checks pods' owner
// chains: delete acts on the observed pod alone (UID precondition).
func (o *Observer) Rollout(ctx context.Context, pods ...decide.Pod) *decide.Rollout {
	r := &decide.Rollout{Name: o.Deployment}
	d, err := o.Client.GetDeployment(ctx, o.Namespace, o.Deployment, kube.Quorum)
	if apierrors.IsNotFound(err) {
		return r
	}
	if err != nil {
		r.Err = fmt.Errorf("get Deployment %s/%s: %w", o.Namespace, o.Deployment, err)
		return r
	}
	r.Found, r.UID, r.Annotations = true, string(d.UID), d.Annotations
	r.Paused = d.Spec.Paused
	r.InProgress, r.Detail = rollingOut(d)
	if o.Decide.RestartMethod == decide.MethodRollout {
		// Read afresh: the last look before acting.
		r.Owners, r.OwnersErr = o.ownerChains(ctx, d, pods, func(ctx context.Context, name string) (*appsv1.ReplicaSet, error) {
			return o.Client.GetReplicaSet(ctx, o.Namespace, name, kube.Quorum)
		})
	}
	return r
}

// annotated is the Deployment's annotations for the pause: none when it is not
// found, nil (not read) when the read failed (the read before a restart decides).
func annotated(name string, d *appsv1.Deployment, err error) *decide.Annotated {
	switch {
	case name == "" || (err != nil && !apierrors.IsNotFound(err)):
		return nil
	case err != nil || d == nil:
		return &decide.Annotated{Deployment: name}
	}
	return &decide.Annotated{Deployment: name, Annotations: d.Annotations}
}

func rollingOut(d *appsv1.Deployment) (bool, string) {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	switch {
	case d.Status.ObservedGeneration < d.Generation:
		return true, fmt.Sprintf("generation %d not yet observed (at %d)", d.Generation, d.Status.ObservedGeneration)
	case d.Status.UpdatedReplicas < want:
		return true, fmt.Sprintf("%d of %d replicas updated", d.Status.UpdatedReplicas, want)
	case d.Status.Replicas > d.Status.UpdatedReplicas:
		return true, fmt.Sprintf("%d old replica(s) still running", d.Status.Replicas-d.Status.UpdatedReplicas)
	}
	return false, ""
}
