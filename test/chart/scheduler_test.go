package chart

// What the watchdog watches, remembers and tells: the simulated AgentENV scheduler
// beside the release, the state ConfigMap, and a webhook receiver.

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentenv/watchdog/internal/schedsim"
	"github.com/agentenv/watchdog/internal/testenv"
	"github.com/agentenv/watchdog/pkg/deliver"
	"github.com/agentenv/watchdog/pkg/kube"
	"github.com/agentenv/watchdog/pkg/state"
	"github.com/agentenv/watchdog/pkg/statestore"
)

// scheduler is the simulated scheduler: its Deployment, one pod, the nodes'
// EndpointSlices (3 serving), a loopback metrics server and its gRPC ListNodes
// knowing those 3 nodes (the default discovery probe reads it).
type scheduler struct {
	ns       string
	metrics  *testenv.MetricsServer
	grpcPort int
	pod      *corev1.Pod
}

// knownNodes is a discovery that knows the nodes testenv.CreateNodeSlices lists.
type knownNodes int

func (n knownNodes) Nodes(bool) []schedsim.SimNode {
	var out []schedsim.SimNode
	for i := range int(n) {
		out = append(out, schedsim.SimNode{ID: fmt.Sprintf("node-%04d", i), Endpoint: "http://198.18.0.2:8000"})
	}
	return out
}

func layOutScheduler(t *testing.T, ns, page string) *scheduler {
	t.Helper()
	ctx, cancel := testenv.Ctx()
	defer cancel()
	_, err := testenv.CreateDeployment(ctx, env.Client, ns, schedDep)
	must(t, err)
	must(t, testenv.CreateNodeSlices(ctx, env.Client, ns, "agentenv-nodes", 3, 100))
	s := &scheduler{ns: ns, metrics: testenv.NewMetricsServer(page)}
	t.Cleanup(s.metrics.Close)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	g := &schedsim.GRPC{Discovery: knownNodes(3)}
	go func() { _ = g.Serve(l) }()
	t.Cleanup(g.Stop)
	s.grpcPort = l.Addr().(*net.TCPAddr).Port
	s.pod, err = testenv.CreateSchedulerPod(ctx, env.Client, ns, testenv.PodSpec{Name: "agentenv-scheduler-abc12"})
	must(t, err)
	return s
}

// stateOf reads the state ConfigMap and decodes its document (nil when it has none;
// both nil before the watchdog created it).
func stateOf(t *testing.T, ns string) (*corev1.ConfigMap, *state.State) {
	t.Helper()
	ctx, cancel := testenv.Ctx()
	defer cancel()
	cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, stateName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) { // the watchdog creates it at its first real pass
		return nil, nil
	}
	must(t, err)
	raw, ok := cm.Data[statestore.DataKey]
	if !ok {
		return cm, nil
	}
	st, err := state.Decode([]byte(raw))
	must(t, err)
	return cm, st
}

// seedState writes, as the admin, a state document holding one restart done an
// hour ago: what a release that has worked for a while keeps, and must keep.
func seedState(t *testing.T, ns string) *state.State {
	t.Helper()
	ctx, cancel := testenv.Ctx()
	defer cancel()
	at := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	st := state.New()
	st.Restarts = []state.Restart{{Pod: "agentenv-scheduler-old12", UID: "0b6f3e0e-0000-4c11-9d7e-2f6a8c1d9e42", Method: "delete",
		ClaimedAt: at, DoneAt: &at, Outcome: state.RestartDone, Reason: "wedged (seeded by the test)"}}
	raw, err := state.Encode(st, at)
	must(t, err)
	// The watchdog creates its ConfigMap and key Secret at its first pass; the test
	// stands in for it, sealing with that key as the watchdog seals.
	key := []byte("a key of 32 bytes, as the watchdog's own, for the test")
	_, err = env.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: keySecret, Namespace: ns},
		Data: map[string][]byte{kube.KeyData: key}}, metav1.CreateOptions{})
	must(t, err)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: stateName, Namespace: ns}, Data: map[string]string{statestore.DataKey: string(raw),
		statestore.SealKey: statestore.Seal(key, ns, stateName, string(raw))}}
	_, err = env.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
	must(t, err)
	return st
}

// receiver is a loopback webhook that checks each alert's HMAC signature.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	events []string
	bad    []string
}

func newReceiver(t *testing.T, key string) *receiver {
	r := &receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		ts, sig := req.Header.Get(deliver.HeaderTimestamp), req.Header.Get(deliver.HeaderSignature)
		r.mu.Lock()
		defer r.mu.Unlock()
		if sig != "sha256="+deliver.Sign([]byte(key), ts, body) {
			r.bad = append(r.bad, req.Header.Get(deliver.HeaderEvent))
		} else {
			r.events = append(r.events, req.Header.Get(deliver.HeaderEvent))
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.Close)
	return r
}

// got returns the events received with a good signature, and those without.
func (r *receiver) got() (good, bad []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string{}, r.events...), append([]string{}, r.bad...)
}
