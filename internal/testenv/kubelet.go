package testenv

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Kubelet stands in for the kubelet of one Node: HTTPS on loopback, serving
// /containerLogs/<namespace>/<pod>/<container>, where the API server proxies
// pods/log (it does not check the kubelet's certificate unless
// --kubelet-certificate-authority is set, which the test control plane does not).
type Kubelet struct {
	*httptest.Server
	mu    sync.Mutex
	log   string
	hang  bool
	calls []url.URL
}

// StartKubelet serves log as every container's log, honouring tailLines and
// limitBytes as the kubelet does.
func StartKubelet(log string) *Kubelet {
	k := &Kubelet{log: log}
	k.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k.mu.Lock()
		k.calls = append(k.calls, *r.URL)
		hang, text := k.hang, k.log
		k.mu.Unlock()
		if !strings.HasPrefix(r.URL.Path, "/containerLogs/") {
			http.NotFound(w, r)
			return
		}
		if hang {
			<-r.Context().Done()
			return
		}
		lines := strings.SplitAfter(strings.TrimSuffix(text, "\n"), "\n")
		if n, err := strconv.Atoi(r.URL.Query().Get("tailLines")); err == nil && n < len(lines) {
			lines = lines[len(lines)-n:]
		}
		out := strings.Join(lines, "") + "\n"
		// As the kubelet does: limitBytes counts from the first of the tailed
		// lines, so it cuts the newest ones off.
		if n, err := strconv.Atoi(r.URL.Query().Get("limitBytes")); err == nil && n < len(out) {
			out = out[:n]
		}
		fmt.Fprint(w, out)
	}))
	return k
}

// Hang makes every log read wait until its client gives up.
func (k *Kubelet) Hang() {
	k.mu.Lock()
	k.hang = true
	k.mu.Unlock()
}

// Requests are the URLs the kubelet was asked for.
func (k *Kubelet) Requests() []url.URL {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]url.URL(nil), k.calls...)
}

// RegisterNode creates Node node with k as its kubelet endpoint and binds pod to
// it, as the scheduler would have. It returns a function that deletes the Node.
func (k *Kubelet) RegisterNode(ctx context.Context, c kubernetes.Interface, node, ns, pod string) (func(), error) {
	_, portText, err := net.SplitHostPort(k.Listener.Addr().String())
	if err != nil {
		return nil, err
	}
	port, _ := strconv.Atoi(portText)
	created, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create node %s: %w", node, err)
	}
	cleanup := func() { _ = c.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) }
	created.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	created.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(port)
	if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return cleanup, fmt.Errorf("set node %s's kubelet endpoint: %w", node, err)
	}
	err = c.CoreV1().Pods(ns).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: ns},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}, metav1.CreateOptions{})
	if err != nil {
		return cleanup, fmt.Errorf("bind pod %s/%s to %s: %w", ns, pod, node, err)
	}
	return cleanup, nil
}
