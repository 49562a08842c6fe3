package testenv

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// SchedulerLabels are the labels of the simulated scheduler's pods.
var SchedulerLabels = map[string]string{"app.kubernetes.io/name": "agentenv-scheduler"}

// CreateNamespace creates a fresh namespace and returns its name.
func (e *Env) CreateNamespace(ctx context.Context, prefix string) (string, error) {
	name := e.UniqueName(prefix)
	_, err := e.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	return name, err
}

// PodSpec describes a simulated scheduler pod.
type PodSpec struct {
	Name string
	// StartedAt is the scheduler container's start; zero means an hour ago.
	StartedAt time.Time
	// IP is the pod IP; default 127.0.0.1 (the metrics server's address).
	IP string
	// Owner names the ReplicaSet controlling the pod; empty is the scheduler
	// Deployment's ("agentenv-scheduler-7d9c4"), "-" is none (a bare pod).
	Owner string
	// OwnerUID is the UID the controller reference gives; empty is the UID of the
	// ReplicaSet of that name if it exists (CreateDeployment makes the default
	// one), else a made-up one.
	OwnerUID types.UID
}

// CreateSchedulerPod creates a Running scheduler pod and sets its status (there is
// no kubelet): Ready, IP, and a running scheduler container started at StartedAt.
func CreateSchedulerPod(ctx context.Context, c kubernetes.Interface, ns string, spec PodSpec) (*corev1.Pod, error) {
	if spec.StartedAt.IsZero() {
		spec.StartedAt = time.Now().Add(-time.Hour)
	}
	if spec.IP == "" {
		spec.IP = "127.0.0.1"
	}
	grace := int64(30)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: spec.Name, Namespace: ns, Labels: SchedulerLabels, OwnerReferences: ownerRefs(ctx, c, ns, spec)},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			Containers:                    []corev1.Container{{Name: "scheduler", Image: "agentenv/scheduler:test"}},
		},
	}
	created, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create pod %s/%s: %w", ns, spec.Name, err)
	}
	started := metav1.NewTime(spec.StartedAt)
	created.Status = corev1.PodStatus{
		Phase:     corev1.PodRunning,
		PodIP:     spec.IP,
		PodIPs:    []corev1.PodIP{{IP: spec.IP}},
		StartTime: &started,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: started},
		},
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: "scheduler", Ready: true, Image: "agentenv/scheduler:test", ImageID: "sha256:test",
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}},
		}},
	}
	updated, err := c.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("set status of pod %s/%s: %w", ns, spec.Name, err)
	}
	// The watchdog lists from the API server's watch cache: wait until it has this.
	if _, err := c.CoreV1().Pods(ns).List(ctx, cachedSince(updated.ResourceVersion)); err != nil {
		return nil, fmt.Errorf("wait for the pod cache: %w", err)
	}
	return updated, nil
}

func ownerRefs(ctx context.Context, c kubernetes.Interface, ns string, spec PodSpec) []metav1.OwnerReference {
	owner, uid := spec.Owner, spec.OwnerUID
	if owner == "-" {
		return nil
	}
	if owner == "" {
		owner = "agentenv-scheduler-7d9c4"
	}
	if uid == "" {
		uid = types.UID("rs-" + owner)
		if rs, err := c.AppsV1().ReplicaSets(ns).Get(ctx, owner, metav1.GetOptions{}); err == nil {
			uid = rs.UID
		}
	}
	yes := true
	// No controller manager runs: the ReplicaSet need not exist (nor is the pod
	// garbage-collected for its absence).
	return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: owner, UID: uid, Controller: &yes}}
}

// DefaultReplicaSet is the name of the ReplicaSet CreateDeployment makes for a
// Deployment, as its controller would ("<deployment>-<pod-template-hash>").
func DefaultReplicaSet(deployment string) string { return deployment + "-7d9c4" }

// CreateReplicaSet creates a ReplicaSet whose controller reference names the
// Deployment called deployment with UID deploymentUID (no controller manager runs:
// it stays as created).
func CreateReplicaSet(ctx context.Context, c kubernetes.Interface, ns, name, deployment string, deploymentUID types.UID) (*appsv1.ReplicaSet, error) {
	yes, one := true, int32(1)
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: SchedulerLabels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: deployment, UID: deploymentUID, Controller: &yes}}},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: SchedulerLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: SchedulerLabels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "scheduler", Image: "agentenv/scheduler:test"}}},
			},
		},
	}
	created, err := c.AppsV1().ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create ReplicaSet %s/%s: %w", ns, name, err)
	}
	return created, nil
}

// cachedSince lists from the watch cache once it holds resourceVersion rv: the API
// server waits for its cache to catch up before it answers.
func cachedSince(rv string) metav1.ListOptions {
	return metav1.ListOptions{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}
}

// CreateNodeSlices creates the agentenv-nodes EndpointSlices with serving node ids,
// split over slices of at most perSlice endpoints.
func CreateNodeSlices(ctx context.Context, c kubernetes.Interface, ns, service string, serving int, perSlice int) error {
	if perSlice <= 0 {
		perSlice = 100
	}
	port := int32(8000)
	name := "node"
	yes := true
	var last string
	for start, n := 0, 0; start < serving || (serving == 0 && n == 0); start, n = start+perSlice, n+1 {
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("%s-%d", service, n), Namespace: ns,
				Labels: map[string]string{discoveryv1.LabelServiceName: service},
			},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port}},
		}
		for i := start; i < serving && i < start+perSlice; i++ {
			slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
				Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", 1+i/65536, (i/256)%256, i%256)},
				Conditions: discoveryv1.EndpointConditions{Ready: &yes, Serving: &yes},
				TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: fmt.Sprintf("node-%04d", i)},
			})
		}
		created, err := c.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create EndpointSlice %s: %w", slice.Name, err)
		}
		last = created.ResourceVersion
		if serving == 0 {
			break
		}
	}
	// The watchdog lists from the API server's watch cache: wait until it has them.
	if _, err := c.DiscoveryV1().EndpointSlices(ns).List(ctx, cachedSince(last)); err != nil {
		return fmt.Errorf("wait for the EndpointSlice cache: %w", err)
	}
	return nil
}

// CreateDeployment creates the scheduler Deployment and its ReplicaSet
// (DefaultReplicaSet) and sets a settled status (no controller runs): generation
// observed and every replica updated.
func CreateDeployment(ctx context.Context, c kubernetes.Interface, ns, name string) (*appsv1.Deployment, error) {
	one := int32(1)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: SchedulerLabels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: SchedulerLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: SchedulerLabels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "scheduler", Image: "agentenv/scheduler:test"}}},
			},
		},
	}
	created, err := c.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create Deployment %s/%s: %w", ns, name, err)
	}
	// Its ReplicaSet, as the Deployment controller would make it: the rollout
	// method checks pod → ReplicaSet → Deployment by UID.
	if _, err := CreateReplicaSet(ctx, c, ns, DefaultReplicaSet(name), name, created.UID); err != nil {
		return nil, err
	}
	return SettleDeployment(ctx, c, created)
}

// SettleDeployment marks the Deployment's current generation as rolled out.
func SettleDeployment(ctx context.Context, c kubernetes.Interface, d *appsv1.Deployment) (*appsv1.Deployment, error) {
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
	return c.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{})
}

// MetricsServer stands in for the scheduler's metrics endpoint on 127.0.0.1.
type MetricsServer struct {
	*httptest.Server
	mu      sync.Mutex
	handler http.HandlerFunc
	page    string
	hits    int
}

// NewMetricsServer serves page until told otherwise.
func NewMetricsServer(page string) *MetricsServer {
	m := &MetricsServer{page: page}
	m.Server = httptest.NewServer(http.HandlerFunc(m.serve))
	return m
}

// NewMetricsServerOn is NewMetricsServer on a listener of the caller's, such as
// one on a NetnsHost.
func NewMetricsServerOn(l net.Listener, page string) *MetricsServer {
	m := &MetricsServer{page: page}
	m.Server = httptest.NewUnstartedServer(http.HandlerFunc(m.serve))
	m.Listener = l
	m.Start()
	return m
}

func (m *MetricsServer) serve(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	m.hits++
	h, page := m.handler, m.page
	m.mu.Unlock()
	if h != nil {
		h(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write([]byte(page))
}

// SetPage serves page from now on.
func (m *MetricsServer) SetPage(page string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.page, m.handler = page, nil
}

// SetHandler replaces the server's behaviour (errors, slowness, HTML...).
func (m *MetricsServer) SetHandler(h http.HandlerFunc) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.handler = h
}

// Hits returns how many requests were served.
func (m *MetricsServer) Hits() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.hits
}

// Port returns the server's port, for --metrics-port.
func (m *MetricsServer) Port() int {
	u, _ := url.Parse(m.URL)
	p, _ := strconv.Atoi(u.Port())
	return p
}
