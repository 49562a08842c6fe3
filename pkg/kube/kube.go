// Package kube is the watchdog's API client: the calls it makes, over client-go's
// REST client with a scheme of only the kinds it uses. Not the generated clientset:
// importing it registers every API group at process start and links every typed
// client, a third of a CronJob run's budget (docs/performance.md).
package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	"github.com/agentenv/watchdog/pkg/httpbound"
)

var (
	scheme = runtime.NewScheme()
	codecs = serializer.NewCodecFactory(scheme)
	params = runtime.NewParameterCodec(scheme)
)

// kinds are the only objects sent or received (whole groups would reflect over ~90 types at start).
var kinds = []struct {
	gv   schema.GroupVersion
	objs []runtime.Object
}{
	{corev1.SchemeGroupVersion, []runtime.Object{&corev1.Pod{}, &corev1.PodList{}, &corev1.PodLogOptions{}, &corev1.ConfigMap{}, &corev1.Secret{}, &corev1.Event{}, &corev1.EventList{}}},
	{appsv1.SchemeGroupVersion, []runtime.Object{&appsv1.Deployment{}, &appsv1.ReplicaSet{}}},
	{discoveryv1.SchemeGroupVersion, []runtime.Object{&discoveryv1.EndpointSlice{}, &discoveryv1.EndpointSliceList{}}},
	{coordinationv1.SchemeGroupVersion, []runtime.Object{&coordinationv1.Lease{}}},
	// watchdog doctor: can this identity make each call (CreateSelfSubjectAccessReview)?
	{authorizationv1.SchemeGroupVersion, []runtime.Object{&authorizationv1.SelfSubjectAccessReview{}}},
}

func init() {
	for _, k := range kinds {
		scheme.AddKnownTypes(k.gv, k.objs...)
		metav1.AddToGroupVersion(scheme, k.gv) // Options, Status and the other meta kinds
	}
}

// Client makes the watchdog's API calls, one REST client per API group.
type Client struct {
	core, apps, discovery, coordination, authz *rest.RESTClient
}

// New builds a client sharing one connection pool (one HTTP/2 connection) across API groups.
func New(cfg *rest.Config) (*Client, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return newFirstRequestGate(httpbound.Headers(rt)) })
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("HTTP client for %s: %w", cfg.Host, err)
	}
	c := &Client{}
	for i, into := range []**rest.RESTClient{&c.core, &c.apps, &c.discovery, &c.coordination, &c.authz} {
		gc := rest.CopyConfig(cfg)
		gv := kinds[i].gv
		gc.GroupVersion = &gv
		gc.APIPath = "/apis"
		if gv.Group == "" {
			gc.APIPath = "/api" // the core group's legacy path
		}
		gc.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(scheme, codecs).WithoutConversion()
		rc, err := rest.RESTClientForConfigAndClient(gc, httpClient)
		if err != nil {
			return nil, fmt.Errorf("REST client for %s: %w", gv, err)
		}
		*into = rc
	}
	return c, nil
}

// FromCache lists from the watch cache (resourceVersion "0"), which every controller reads anyway.
func FromCache(opts metav1.ListOptions) metav1.ListOptions {
	opts.ResourceVersion = "0"
	opts.ResourceVersionMatch = ""
	return opts
}

func (c *Client) ListPods(ctx context.Context, ns string, opts metav1.ListOptions) (*corev1.PodList, error) {
	return into[corev1.PodList](ctx, c.core.Get().Namespace(ns).Resource("pods").VersionedParams(&opts, params))
}

// DeletePod returns the pod as the API server answered (nil when it answered a Status).
func (c *Client) DeletePod(ctx context.Context, ns, name string, opts metav1.DeleteOptions) (*corev1.Pod, error) {
	res := c.core.Delete().Namespace(ns).Resource("pods").Name(name).Body(&opts).Do(ctx)
	if err := res.Error(); err != nil {
		return nil, err
	}
	pod := &corev1.Pod{}
	if res.Into(pod) != nil {
		return nil, nil
	}
	return pod, nil
}

func (c *Client) ListEndpointSlices(ctx context.Context, ns string, opts metav1.ListOptions) (*discoveryv1.EndpointSliceList, error) {
	return into[discoveryv1.EndpointSliceList](ctx, c.discovery.Get().Namespace(ns).Resource("endpointslices").VersionedParams(&opts, params))
}

// WatchEndpointSlices watches EndpointSlices until ctx or opts.TimeoutSeconds ends.
func (c *Client) WatchEndpointSlices(ctx context.Context, ns string, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return c.discovery.Get().Namespace(ns).Resource("endpointslices").VersionedParams(&opts, params).Watch(ctx)
}

func (c *Client) CreateEndpointSlice(ctx context.Context, s *discoveryv1.EndpointSlice, opts metav1.CreateOptions) (*discoveryv1.EndpointSlice, error) {
	return into[discoveryv1.EndpointSlice](ctx, c.discovery.Post().Namespace(s.Namespace).Resource("endpointslices").VersionedParams(&opts, params).Body(s))
}

func (c *Client) GetEndpointSlice(ctx context.Context, ns, name string) (*discoveryv1.EndpointSlice, error) {
	return into[discoveryv1.EndpointSlice](ctx, c.discovery.Get().Namespace(ns).Resource("endpointslices").Name(name))
}

func (c *Client) DeleteEndpointSlice(ctx context.Context, ns, name string, opts metav1.DeleteOptions) error {
	return c.discovery.Delete().Namespace(ns).Resource("endpointslices").Name(name).Body(&opts).Do(ctx).Error()
}

// GetConfigMap reads a ConfigMap (a quorum read: state must be current).
func (c *Client) GetConfigMap(ctx context.Context, ns, name string) (*corev1.ConfigMap, error) {
	return into[corev1.ConfigMap](ctx, c.core.Get().Namespace(ns).Resource("configmaps").Name(name))
}

// ListConfigMaps lists ConfigMaps (ns "": in every namespace).
func (c *Client) ListConfigMaps(ctx context.Context, ns string, opts metav1.ListOptions) (*corev1.ConfigMapList, error) {
	return into[corev1.ConfigMapList](ctx, c.core.Get().Namespace(ns).Resource("configmaps").VersionedParams(&opts, params))
}

func (c *Client) CreateConfigMap(ctx context.Context, cm *corev1.ConfigMap, opts metav1.CreateOptions) (*corev1.ConfigMap, error) {
	return into[corev1.ConfigMap](ctx, c.core.Post().Namespace(cm.Namespace).Resource("configmaps").VersionedParams(&opts, params).Body(cm))
}

// UpdateConfigMap replaces a ConfigMap; cm.ResourceVersion is the precondition.
func (c *Client) UpdateConfigMap(ctx context.Context, cm *corev1.ConfigMap, opts metav1.UpdateOptions) (*corev1.ConfigMap, error) {
	return into[corev1.ConfigMap](ctx, c.core.Put().Namespace(cm.Namespace).Resource("configmaps").Name(cm.Name).VersionedParams(&opts, params).Body(cm))
}

// CreateEvent creates a core/v1 Event.
func (c *Client) CreateEvent(ctx context.Context, ev *corev1.Event) (*corev1.Event, error) {
	return into[corev1.Event](ctx, c.core.Post().Namespace(ev.Namespace).Resource("events").Body(ev))
}

// ListEvents lists Events (watchdog history reads the watchdog's own).
func (c *Client) ListEvents(ctx context.Context, ns string, opts metav1.ListOptions) (*corev1.EventList, error) {
	return into[corev1.EventList](ctx, c.core.Get().Namespace(ns).Resource("events").VersionedParams(&opts, params))
}

// Quorum reads the current object from etcd; Cached from the watch cache, as FromCache
// lists: enough where a UID is all that is checked, and no etcd read per sample.
var (
	Quorum = metav1.GetOptions{}
	Cached = metav1.GetOptions{ResourceVersion: "0"}
)

func (c *Client) GetDeployment(ctx context.Context, ns, name string, opts metav1.GetOptions) (*appsv1.Deployment, error) {
	return into[appsv1.Deployment](ctx, c.apps.Get().Namespace(ns).Resource("deployments").Name(name).VersionedParams(&opts, params))
}

// GetReplicaSet reads a ReplicaSet (a pod's link to its Deployment, checked by UID).
func (c *Client) GetReplicaSet(ctx context.Context, ns, name string, opts metav1.GetOptions) (*appsv1.ReplicaSet, error) {
	return into[appsv1.ReplicaSet](ctx, c.apps.Get().Namespace(ns).Resource("replicasets").Name(name).VersionedParams(&opts, params))
}

func (c *Client) PatchDeployment(ctx context.Context, ns, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions) (*appsv1.Deployment, error) {
	return into[appsv1.Deployment](ctx, c.apps.Patch(pt).Namespace(ns).Resource("deployments").Name(name).VersionedParams(&opts, params).Body(data))
}

func (c *Client) GetLease(ctx context.Context, ns, name string) (*coordinationv1.Lease, error) {
	return into[coordinationv1.Lease](ctx, c.coordination.Get().Namespace(ns).Resource("leases").Name(name))
}

func (c *Client) CreateLease(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	return into[coordinationv1.Lease](ctx, c.coordination.Post().Namespace(l.Namespace).Resource("leases").Body(l))
}

// UpdateLease replaces a Lease; l.ResourceVersion is the precondition.
func (c *Client) UpdateLease(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	return into[coordinationv1.Lease](ctx, c.coordination.Put().Namespace(l.Namespace).Resource("leases").Name(l.Name).Body(l))
}

// PodLog streams a container's log (pods/log, from the node's kubelet).
func (c *Client) PodLog(ctx context.Context, ns, pod string, opts *corev1.PodLogOptions) (io.ReadCloser, error) {
	return c.core.Get().Namespace(ns).Resource("pods").Name(pod).SubResource("log").VersionedParams(opts, params).Stream(ctx)
}

// into runs r and decodes its answer into a new T.
func into[T any, PT interface {
	*T
	runtime.Object
}](ctx context.Context, r *rest.Request) (PT, error) {
	out := PT(new(T))
	return out, r.Do(ctx).Into(out)
}

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

// The calls of `watchdog doctor` only.

// CreateSelfSubjectAccessReview asks whether the client's own identity may make one call.
func (c *Client) CreateSelfSubjectAccessReview(ctx context.Context, r *authorizationv1.SelfSubjectAccessReview) (*authorizationv1.SelfSubjectAccessReview, error) {
	return into[authorizationv1.SelfSubjectAccessReview](ctx, c.authz.Post().Resource("selfsubjectaccessreviews").Body(r))
}

// ServerVersion reads /version and the Date header, the API server's clock (to the
// second), through the REST client's HTTP client (the REST client hides headers).
func (c *Client) ServerVersion(ctx context.Context) (*version.Info, time.Time, error) {
	u := c.core.Get().AbsPath("/version").URL()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, time.Time{}, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.core.Client.Do(req)
	if err != nil {
		return nil, time.Time{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, time.Time{}, fmt.Errorf("GET %s answered %s", u, resp.Status)
	}
	info := &version.Info{}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(info); err != nil {
		return nil, time.Time{}, fmt.Errorf("GET %s: no version document read: %w", u, err)
	}
	date, err := http.ParseTime(resp.Header.Get("Date"))
	if err != nil {
		return info, time.Time{}, fmt.Errorf("GET %s: no usable Date header (%q)", u, resp.Header.Get("Date"))
	}
	return info, date, nil
}
