// Package observe gathers what one run needs from the API server and the scheduler
// pods' metrics, and turns it into a decide.Observation.
package observe

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

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
	Reads       Reads    // what to read beside the pods and EndpointSlices
	owners      sync.Map // the objects read for Ownership (ownersTTL)
	MaxScrapes  int      // bounds the scrapes in flight; zero or less: DefaultMaxScrapes
	Clock       clock.PassiveClock
	// Via is the resolved scrape path; for apiserver, Scraper is proxied through APIServer (a URL).
	Via       scrape.Via
	APIServer string
}

// Reads says what an observation reads: the selection (Lease, Deployment, owner chains; the pods
// decide.Judged picks are scraped) and whether a restart is a rollout (its last look reads ReplicaSets).
type Reads struct {
	decide.Selection
	Rollout bool
}

// Observe lists the pods, counts expected nodes (watch cache) and reads the Lease and Deployment if
// configured, in parallel, then scrapes the judged pods. An error: the pods could not be listed.
func (o *Observer) Observe(ctx context.Context) (decide.Observation, error) {
	return o.observe(ctx, false)
}

// ObserveConsistent is Observe with quorum lists, the last look before a restart:
// the watch cache lags most during API-server trouble.
func (o *Observer) ObserveConsistent(ctx context.Context) (decide.Observation, error) {
	return o.observe(ctx, true)
}

func (o *Observer) observe(ctx context.Context, consistent bool) (decide.Observation, error) {
	// Stamped when it began: samples start on a fixed cadence, so the wedge clock counts whole
	// intervals however slow the API server is.
	obs := decide.Observation{At: o.Clock.Now(), Consistent: consistent}
	var wg sync.WaitGroup
	var pods *corev1.PodList
	var dep *appsv1.Deployment
	var podsErr, depErr error
	opts := metav1.ListOptions{LabelSelector: o.Selector}
	if !consistent {
		opts = kube.FromCache(opts)
	}
	wg.Go(func() { pods, podsErr = o.Client.ListPods(ctx, o.Namespace, opts) })
	wg.Go(func() { obs.Expected, obs.ExpectedErr = o.Endpoints.Read(ctx, consistent) })
	if o.Reads.LeaderLease != "" {
		wg.Go(func() { obs.Leader = o.readLeader(ctx) })
	}
	if o.Reads.JudgePods == decide.JudgeDeployment || o.Deployment != "" { // and for the pause annotations
		wg.Go(func() { dep, depErr = o.cachedDeployment(ctx) })
	}
	wg.Wait()
	if podsErr != nil {
		return decide.Observation{}, fmt.Errorf("list scheduler pods (%s) in %s: %w", o.Selector, o.Namespace, podsErr)
	}
	obs.Pods = make([]decide.Pod, len(pods.Items))
	for i := range pods.Items {
		obs.Pods[i] = o.Describe(&pods.Items[i])
	}
	if o.Reads.JudgePods == decide.JudgeDeployment || o.Deployment != "" {
		obs.Ownership = o.ownership(ctx, dep, depErr, obs.Pods)
	}
	// Only the pods decide will judge: standbys read 0 by design, and a selector
	// gone wide must not become the watchdog's own fan-out (--max-pods).
	judged, _, _ := decide.Judged(obs, o.Reads.Selection)
	var scrapes sync.WaitGroup
	slots := make(chan struct{}, cmp.Or(max(o.MaxScrapes, 0), DefaultMaxScrapes))
	for i := range pods.Items {
		pod, p := &pods.Items[i], &obs.Pods[i]
		if !slices.ContainsFunc(judged, func(j decide.Pod) bool { return j.UID == p.UID }) {
			continue
		}
		scrapes.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			if url := o.URL(pod); url == "" {
				p.ScrapeErr = &scrape.Error{Kind: scrape.KindUnreachable, Err: fmt.Errorf("pod %s has no IP", pod.Name)}
			} else if sample, err := o.Scraper.Scrape(ctx, url); err != nil {
				p.ScrapeErr = err
			} else {
				p.Sample = &sample
			}
		})
	}
	scrapes.Wait()
	return obs, nil
}

// DefaultMaxScrapes is how many pods are scraped at once: an HA scheduler's replicas in one round.
const DefaultMaxScrapes = 4

// URL is where a pod's metrics are read ("" while it has no IP, which the proxy needs
// too): the pod IP (the Service exposes only gRPC), or the API server's pod proxy,
// under the server URL's path prefix if any (a cluster behind Rancher).
func (o *Observer) URL(pod *corev1.Pod) string {
	switch {
	case pod.Status.PodIP == "":
		return ""
	case o.Via == scrape.ViaAPIServer:
		return strings.TrimRight(o.APIServer, "/") + "/api/v1/namespaces/" + url.PathEscape(pod.Namespace) +
			"/pods/" + url.PathEscape(pod.Name) + ":" + strconv.Itoa(o.MetricsPort) + "/proxy" + o.MetricsPath
	}
	return "http://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(o.MetricsPort)) + o.MetricsPath
}

// Describe turns a pod into the decision core's view, aged from the scheduler
// container's current run (a container restart is a fresh start), else the pod's start.
func (o *Observer) Describe(pod *corev1.Pod) decide.Pod {
	p := decide.Pod{Name: pod.Name, UID: string(pod.UID), Phase: string(pod.Status.Phase), IP: pod.Status.PodIP,
		Terminating: pod.DeletionTimestamp != nil, CreatedAt: pod.CreationTimestamp.Time}
	if owner := metav1.GetControllerOf(pod); owner != nil {
		p.ControllerKind, p.ControllerName, p.ControllerUID = owner.Kind, owner.Name, string(owner.UID)
	}
	p.Ready = slices.ContainsFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	})
	podStart := ptr.Deref(pod.Status.StartTime, metav1.Time{}).Time
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
	if pod.Status.Phase == corev1.PodRunning && !podStart.IsZero() {
		p.Running, p.StartedAt = true, podStart
	} else {
		p.WaitingReason = fmt.Sprintf("pod phase %s, no status for container %q", pod.Status.Phase, o.Container)
	}
	return p
}

func (o *Observer) readLeader(ctx context.Context) *decide.Leader {
	lease, err := o.Client.GetLease(ctx, o.Namespace, o.Reads.LeaderLease)
	if err != nil {
		return &decide.Leader{Err: fmt.Errorf("get Lease %s/%s: %w", o.Namespace, o.Reads.LeaderLease, err)}
	}
	return &decide.Leader{Holder: ptr.Deref(lease.Spec.HolderIdentity, ""), WrittenAt: renewalWritten(lease),
		RenewedAt: ptr.Deref(lease.Spec.RenewTime, metav1.MicroTime{}).Time,
		Duration:  time.Duration(ptr.Deref(lease.Spec.LeaseDurationSeconds, 0)) * time.Second}
}

// renewalWritten is when the API server last wrote spec.renewTime, by its own clock
// (docs/design.md, "HA variant"), or zero: another manager's edit is not a renewal.
func renewalWritten(lease *coordinationv1.Lease) time.Time {
	var at time.Time
	for _, m := range lease.ManagedFields {
		if m.Time != nil && m.Time.After(at) && m.FieldsV1 != nil &&
			bytes.Contains(m.FieldsV1.GetRawBytes(), []byte(`"f:renewTime"`)) {
			at = m.Time.Time
		}
	}
	return at
}

// Rollout reads the scheduler Deployment for the rollout gate (missing is no error:
// the pod may be managed otherwise) and, for the rollout method, the owner chains.
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
	r.Found, r.UID, r.Annotations, r.Paused = true, string(d.UID), d.Annotations, d.Spec.Paused
	switch want := ptr.Deref(d.Spec.Replicas, 1); {
	case d.Status.ObservedGeneration < d.Generation:
		r.Detail = fmt.Sprintf("generation %d not yet observed (at %d)", d.Generation, d.Status.ObservedGeneration)
	case d.Status.UpdatedReplicas < want:
		r.Detail = fmt.Sprintf("%d of %d replicas updated", d.Status.UpdatedReplicas, want)
	case d.Status.Replicas > d.Status.UpdatedReplicas:
		r.Detail = fmt.Sprintf("%d old replica(s) still running", d.Status.Replicas-d.Status.UpdatedReplicas)
	}
	r.InProgress = r.Detail != ""
	if o.Reads.Rollout { // afresh (quorum): the last look before acting
		r.Owners, r.OwnersErr = o.ownerChains(ctx, d, pods, func(ctx context.Context, name string) (*appsv1.ReplicaSet, error) {
			return o.Client.GetReplicaSet(ctx, o.Namespace, name, kube.Quorum)
		})
	}
	return r
}

// pageSize keeps each list response small (a slice holds up to 100 endpoints);
// maxPages bounds a list that never ends. Pages are counted as they come.
const pageSize, maxPages = 50, 100

// EndpointLister reads the node Service's EndpointSlices from the API server.
type EndpointLister struct {
	Client    *kube.Client
	Namespace string
	Service   string
	Port      int32
}

// Read counts the Service's EndpointSlices, page by page from the watch cache or, consistent, quorum.
// A count no correct Service and port gives (*endpoints.MisconfiguredError), or past MaxNodes, fails.
func (l EndpointLister) Read(ctx context.Context, consistent bool) (endpoints.Count, error) {
	k := endpoints.Counter{Port: l.Port}
	opts := metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + l.Service, Limit: pageSize}
	if !consistent {
		opts = kube.FromCache(opts)
	}
	for page := 1; ; page++ {
		list, err := l.Client.ListEndpointSlices(ctx, l.Namespace, opts)
		if err == nil {
			err = k.Add(list.Items)
		}
		if err != nil {
			return endpoints.Count{}, fmt.Errorf("list EndpointSlices of service %s/%s: %w", l.Namespace, l.Service, err)
		}
		if list.Continue == "" {
			break
		}
		if page == maxPages {
			return endpoints.Count{}, fmt.Errorf("list EndpointSlices of service %s/%s: more than %d pages of %d", l.Namespace, l.Service, maxPages, pageSize)
		}
		opts.Continue = list.Continue
	}
	c := k.Count()
	return c, c.Check(l.Namespace, l.Service, l.Port)
}
