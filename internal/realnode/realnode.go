// Package realnode drives the one-node cluster hack/cluster.sh starts: the images
// and chart pushed to its registry, and the AgentENV layout the watchdog watches,
// as pods the kubelet runs (the hack/schedsim stand-in). test/e2e and `make demo`
// share it.
package realnode

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// Names of the AgentENV layout (the chart's defaults).
const (
	Scheduler    = "agentenv-scheduler"
	Nodes        = "agentenv-node"
	NodesService = "agentenv-nodes"
	// ControlPort is the scheduler stand-in's control port (hack/schedsim).
	ControlPort = 9190
	// SimSpeed is the stand-in's clock: 4 scheduler seconds a second, so its "ready
	// drops 40 s after the roll" takes 10 s.
	SimSpeed = "4"
)

// Cluster is a running node, as `hack/cluster.sh env` describes it.
type Cluster struct {
	Kubeconfig string
	Registry   string // host:port of the loopback registry
	Bin        string // the node's binaries: kubectl, release, schedsim
	HostIP     string // the bridge's host address, which pods reach
	Client     kubernetes.Interface
}

// FromEnv reads the cluster from the environment `hack/cluster.sh env` gives.
func FromEnv() (*Cluster, error) {
	c := &Cluster{}
	for name, into := range map[string]*string{
		"KUBECONFIG": &c.Kubeconfig, "WATCHDOG_REGISTRY": &c.Registry, "WATCHDOG_CLUSTER_BIN": &c.Bin, "WATCHDOG_CLUSTER_HOST_IP": &c.HostIP,
	} {
		if *into = os.Getenv(name); *into == "" {
			return nil, fmt.Errorf("%s is not set: start the node with hack/cluster.sh up and export $(hack/cluster.sh env)", name)
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return nil, err
	}
	if c.Client, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	return c, nil
}

// Images are what Push put in the registry.
type Images struct {
	WatchdogRepo, WatchdogDigest string
	Sim                          string // the stand-in's image, by digest
	ChartRef, ChartVersion       string
}

// Push builds the watchdog's image from watchdogBin (this machine's platform, on
// the local base `make image` builds on) and the stand-in's, packages the chart of the repository at root, and pushes
// all three to the node's registry. helm is the helm binary, helmEnv its environment.
// caBundle, when set, is the watchdog image's CA bundle (the machine's otherwise):
// a test's own CA, for receivers it serves over TLS.
func (c *Cluster) Push(ctx context.Context, root, watchdogBin, caBundle, helm string, helmEnv []string) (Images, error) {
	var im Images
	dir, err := os.MkdirTemp("", "watchdog-realnode-")
	if err != nil {
		return im, err
	}
	defer os.RemoveAll(dir)
	release := filepath.Join(c.Bin, "release")
	run := func(env []string, name string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir, cmd.Env = root, append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("%s %s: %w\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out)), nil
	}
	im.WatchdogRepo = c.Registry + "/agentenv/scheduler-watchdog"
	imageArgs := []string{"binary-image", "--binary", watchdogBin, "--cmd", "check", "--ref", im.WatchdogRepo + ":e2e", "--insecure"}
	if caBundle != "" {
		imageArgs = append(imageArgs, "--ca-bundle", caBundle)
	}
	if im.WatchdogDigest, err = run(nil, release, imageArgs...); err != nil {
		return im, err
	}
	simRepo := c.Registry + "/agentenv/scheduler-sim"
	d, err := run(nil, release, "binary-image", "--binary", filepath.Join(c.Bin, "schedsim"), "--cmd", "scheduler", "--ref", simRepo+":e2e", "--insecure")
	if err != nil {
		return im, err
	}
	im.Sim = simRepo + "@" + d
	if _, err := run(helmEnv, helm, "package", filepath.Join(root, "charts", "agentenv-scheduler-watchdog"), "--destination", dir); err != nil {
		return im, err
	}
	pkgs, _ := filepath.Glob(dir + "/agentenv-scheduler-watchdog-*.tgz")
	if len(pkgs) != 1 {
		return im, fmt.Errorf("helm package wrote %v, want one chart", pkgs)
	}
	im.ChartVersion = strings.TrimSuffix(strings.TrimPrefix(filepath.Base(pkgs[0]), "agentenv-scheduler-watchdog-"), ".tgz")
	if _, err := run(helmEnv, helm, "push", pkgs[0], "oci://"+c.Registry+"/charts", "--plain-http"); err != nil {
		return im, err
	}
	im.ChartRef = "oci://" + c.Registry + "/charts/agentenv-scheduler-watchdog"
	return im, nil
}

// LayOut creates what the watchdog watches in ns, as pods the kubelet runs: the
// scheduler stand-in's Deployment (one replica) and three simulated runtime nodes
// behind the agentenv-nodes Service, whose EndpointSlices the real controller
// keeps. It waits until all are Ready.
func (c *Cluster) LayOut(ctx context.Context, ns, simImage string) error {
	nonRoot, ro, no := true, true, false
	secure := &corev1.SecurityContext{RunAsNonRoot: &nonRoot, ReadOnlyRootFilesystem: &ro, AllowPrivilegeEscalation: &no,
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
	grace := int64(5)
	deployment := func(name string, replicas int32, ctr corev1.Container) *appsv1.Deployment {
		labels := map[string]string{"app.kubernetes.io/name": name}
		ctr.Image, ctr.SecurityContext = simImage, secure
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
			Spec: appsv1.DeploymentSpec{
				Replicas: &replicas,
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{TerminationGracePeriodSeconds: &grace, Containers: []corev1.Container{ctr}},
				},
			},
		}
	}
	probe := func(path string, port int) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt(port)}}, PeriodSeconds: 1}
	}
	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, deployment(Nodes, 3, corev1.Container{
		Name: "node", Args: []string{"node"}, ReadinessProbe: probe("/healthz", 8000),
		Ports: []corev1.ContainerPort{{Name: "node", ContainerPort: 8000}},
	}), metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := c.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: NodesService, Namespace: ns},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"app.kubernetes.io/name": Nodes},
			Ports: []corev1.ServicePort{{Name: "node", Port: 8000}}},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}
	// The scheduler's discovery reads the nodes' EndpointSlices with its own identity.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: Scheduler, Namespace: ns}}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: Scheduler, Namespace: ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}}}}
	bind := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: Scheduler, Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: Scheduler},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: Scheduler, Namespace: ns}}}
	if _, err := c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := c.Client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := c.Client.RbacV1().RoleBindings(ns).Create(ctx, bind, metav1.CreateOptions{}); err != nil {
		return err
	}
	sched := deployment(Scheduler, 1, corev1.Container{
		Name: "scheduler", Args: []string{"scheduler", "--nodes", "3", "--speed", SimSpeed, "--namespace", ns}, ReadinessProbe: probe("/metrics", 9101),
		Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9101}, {Name: "control", ContainerPort: ControlPort}, {Name: "grpc", ContainerPort: 9090}},
	})
	sched.Spec.Template.Spec.ServiceAccountName = Scheduler
	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, sched, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := c.WaitDeploymentReady(ctx, ns, Nodes, 3); err != nil {
		return err
	}
	return c.WaitDeploymentReady(ctx, ns, Scheduler, 1)
}

// Poll calls cond every second (the cluster's controllers act in seconds; a finer
// poll only loads the API server) until it holds, or fails when ctx ends.
func Poll(ctx context.Context, what string, cond func() bool) error {
	for !cond() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(time.Second):
		}
	}
	return nil
}

// WaitDeploymentReady waits (up to 2 minutes) until the Deployment's pods are Ready,
// as the kubelet reports them.
func (c *Cluster) WaitDeploymentReady(ctx context.Context, ns, name string, replicas int32) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return Poll(ctx, fmt.Sprintf("Deployment %s/%s: %d ready", ns, name, replicas), func() bool {
		d, err := c.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && d.Status.ObservedGeneration == d.Generation && d.Status.ReadyReplicas == replicas &&
			d.Status.UpdatedReplicas == replicas && d.Status.Replicas == replicas
	})
}

// SchedulerPods are the scheduler's running, Ready pods not being deleted.
func (c *Cluster) SchedulerPods(ctx context.Context, ns string) ([]corev1.Pod, error) {
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + Scheduler})
	if err != nil {
		return nil, err
	}
	var ready []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && PodReady(&p) {
			ready = append(ready, p)
		}
	}
	return ready, nil
}

// PodReady says whether the kubelet reports the pod Ready.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Control tells the scheduler stand-in in pod p to misbehave (hack/schedsim's
// control port: "discovery?state=lost", "slow?delay=10s", "fail?status=500"), over
// the pod network.
func Control(ctx context.Context, p *corev1.Pod, path string) error {
	url := fmt.Sprintf("http://%s/%s", net.JoinHostPort(p.Status.PodIP, fmt.Sprint(ControlPort)), path)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("POST %s: %s", url, resp.Status)
	}
	return nil
}
