package integration

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/agentenv/watchdog/internal/schedsim"
	"github.com/agentenv/watchdog/internal/testenv"
)

// probeWorld is an AgentENV installation in a namespace whose scheduler stand-in
// has a real discovery (a list and watch of the nodes' EndpointSlices on the API
// server) and serves ListNodes over gRPC, with three runtime nodes answering the
// gateway's list calls inside a network namespace (198.18.0.0/15: the API server
// refuses loopback addresses in EndpointSlices), and the gateway stand-in.
type probeWorld struct {
	*scenario
	host      *testenv.NetnsHost
	port      int // the nodes port: the runtime nodes', and the canary's
	disco     *schedsim.Discovery
	grpc      *schedsim.GRPC
	gateway   *httptest.Server
	cancelSim context.CancelFunc
}

const canaryName = "agentenv-scheduler-watchdog-probe"

// newProbeWorld lays it out; the stand-in's discovery reads the API server through
// via (nil: directly).
func newProbeWorld(t *testing.T, via ...kubernetes.Interface) *probeWorld {
	host, err := testenv.NewNetnsHost()
	must(t, err)
	t.Cleanup(func() { _ = host.Close() })
	// A port free on the canary's address; the nodes answer on it in the namespace.
	free, err := net.Listen("tcp", net.JoinHostPort(host.HostIP, "0"))
	must(t, err)
	port := free.Addr().(*net.TCPAddr).Port
	free.Close()
	nodes, err := host.ListenPort(port)
	must(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `[{"sandboxID":"11111111-2222-3333-4444-555555555555"}]`)
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(nodes) }()
	t.Cleanup(func() { _ = srv.Close() })

	s := newScenario(t, layout{serving: 0, page: testenv.Page(testenv.Values{Ready: 3, HeartbeatOK: 3000})})
	ctx, cancel := testenv.Ctx()
	defer cancel()
	// Replace the placeholder slice with three nodes on the namespace's address.
	must(t, env.Client.DiscoveryV1().EndpointSlices(s.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}))
	yes, p := true, int32(port)
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "agentenv-nodes-a", Namespace: s.ns, Labels: map[string]string{discoveryv1.LabelServiceName: "agentenv-nodes"}},
		AddressType: discoveryv1.AddressTypeIPv4, Ports: []discoveryv1.EndpointPort{{Port: &p}}}
	for i := range 3 {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{host.PeerIP}, Conditions: discoveryv1.EndpointConditions{Ready: &yes, Serving: &yes},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: s.ns, Name: fmt.Sprintf("node-%d", i)}})
	}
	_, err = env.Client.DiscoveryV1().EndpointSlices(s.ns).Create(ctx, slice, metav1.CreateOptions{})
	must(t, err)

	w := &probeWorld{scenario: s, host: host, port: port}
	simCtx, cancelSim := context.WithCancel(context.Background())
	w.cancelSim = cancelSim
	t.Cleanup(cancelSim)
	c := env.Client
	if len(via) > 0 {
		c = via[0]
	}
	w.disco = &schedsim.Discovery{Client: c, Namespace: s.ns, Service: "agentenv-nodes", Port: p, RelistDelay: time.Second}
	w.disco.Start(simCtx)
	t.Cleanup(w.disco.Kill)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	w.grpc = &schedsim.GRPC{Discovery: w.disco}
	go func() { _ = w.grpc.Serve(l) }()
	t.Cleanup(w.grpc.Stop)
	w.gateway = httptest.NewServer(&schedsim.Gateway{Scheduler: l.Addr().String(), Timeout: 10 * time.Second})
	t.Cleanup(w.gateway.Close)
	w.base = append(w.base, "--nodes-port", strconv.Itoa(port), "--scheduler-grpc-port", strconv.Itoa(l.Addr().(*net.TCPAddr).Port),
		"--discovery-probe", "canary", "--probe-address", host.HostIP)
	for deadline := time.Now().Add(10 * time.Second); len(w.disco.Nodes(true)) < 3; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the stand-in's discovery never listed the nodes")
		}
	}
	return w
}

// list is the gateway's GET /sandboxes: its status and body.
func (w *probeWorld) list(t *testing.T) (int, string) {
	resp, err := http.Get(w.gateway.URL + "/sandboxes")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func (w *probeWorld) canary(t *testing.T) *discoveryv1.EndpointSlice {
	ctx, cancel := testenv.Ctx()
	defer cancel()
	s, err := env.Client.DiscoveryV1().EndpointSlices(w.ns).Get(ctx, canaryName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	must(t, err)
	return s
}

// The canary on a real API server, a real (stand-in) discovery and the gateway's
// all-or-nothing list: a live discovery shows it within the pass's first sample;
// it is gone after the pass; the gateway's lists answer 200 throughout, canaries
// coming and going; a leftover at an address nobody answers (the gateway's 502:
// the stand-in is as fragile as the real one) is removed by the next pass.
func TestCanaryOnARealAPIServer(t *testing.T) {
	w := newProbeWorld(t)
	var lists, failed atomic.Int64
	var firstFailure atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if code, body := w.list(t); code != http.StatusOK {
				failed.Add(1)
				firstFailure.CompareAndSwap(nil, fmt.Sprintf("%d %s", code, body))
			}
			lists.Add(1)
		}
	})
	for range 5 {
		r := w.check()
		r.expect(t, 0, "healthy", "none")
		if p := r.report.Targets[0].Probe; !strings.Contains(p, "after it was written") || !strings.Contains(p, "0 of the 3 serving unknown") {
			t.Errorf("the canary must show in the first sample: %q", p)
		}
		if w.canary(t) != nil {
			t.Fatal("the canary outlived its pass")
		}
	}
	close(stop)
	wg.Wait()
	if failed.Load() > 0 || lists.Load() < 5 {
		t.Fatalf("the gateway's list failed %d of %d times while canaries came and went: %v", failed.Load(), lists.Load(), firstFailure.Load())
	}
	t.Logf("%d gateway lists, all 200, over 5 passes with a canary each", lists.Load())

	// A canary left behind by a killed pass, at an address nothing answers.
	ctx, cancel := testenv.Ctx()
	defer cancel()
	yes, p := true, int32(w.port)
	leftover := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: canaryName, Namespace: w.ns, Labels: map[string]string{discoveryv1.LabelServiceName: "agentenv-nodes"}},
		AddressType: discoveryv1.AddressTypeIPv4, Ports: []discoveryv1.EndpointPort{{Port: &p}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{w.host.HostIP}, Conditions: discoveryv1.EndpointConditions{Serving: &yes, Terminating: &yes},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "agentenv-scheduler-watchdog-probe-left"}}}}
	_, err := env.Client.DiscoveryV1().EndpointSlices(w.ns).Create(ctx, leftover, metav1.CreateOptions{})
	must(t, err)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if code, _ := w.list(t); code == http.StatusBadGateway {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a canary nobody answers did not break the gateway stand-in's list: it is not as strict as the real one")
		}
	}
	w.check().expect(t, 0, "healthy", "none")
	if code, body := w.list(t); code != http.StatusOK || w.canary(t) != nil {
		t.Fatalf("the pass did not remove the leftover: %d %s", code, body)
	}
}

// Discovery dead with no node change: ready 3, heartbeats accepted; only the
// canary sees it, and once it has been missing for the window (shortened here)
// every gate passes as for any wedge and the pod is restarted. The reason names it.
func TestCanaryCatchesADeadDiscovery(t *testing.T) {
	w := newProbeWorld(t)
	w.disco.Kill()
	r := w.check("--probe-window", "4s", "--confirm-window", "2s", "--sample-interval", "1s", "--wedged-for", "1m", "--timeout", "20s")
	r.expect(t, 0, "wedged", "restart")
	if tg := r.report.Targets[0]; tg.Evidence != "strong" || !strings.Contains(tg.Reason, "canaries were missing from the scheduler's node list") {
		t.Errorf("the restart must rest on the canary: %+v", tg)
	}
	if w.podExists(w.pod.Name) {
		t.Error("the pod was not restarted")
	}
	if w.canary(t) != nil {
		t.Error("the canary outlived the pass")
	}
}

// Fail safe: an HA standby's Unavailable is unknown for the probe, said in the
// report, and changes no verdict.
func TestListNodesFromAStandbyIsUnknown(t *testing.T) {
	w := newProbeWorld(t)
	w.grpc.NotLeader.Store(true)
	r := w.check("--discovery-probe", "list")
	r.expect(t, 0, "healthy", "none")
	if p := r.report.Targets[0].Probe; !strings.Contains(p, "Unavailable") || !strings.Contains(p, "unknown for the probe's evidence") {
		t.Errorf("the report must say the probe could not tell: %q", p)
	}
}

// Ready 0 while the scheduler's discovery knows every serving node and rejects
// nothing: the nodes cannot reach it. Its own alert, no restart.
func TestNodesThatCannotReachTheScheduler(t *testing.T) {
	w := newProbeWorld(t)
	w.metrics.SetPage(testenv.Page(testenv.Values{Ready: 0, Unhealthy: 3, HeartbeatOK: 3000}))
	rcv := newReceiver(t)
	args := append([]string{"--discovery-probe", "list"}, checkAlertFlags(rcv)...)
	for range 2 {
		r := w.check(args...)
		r.expect(t, 0, "wedged", "none")
		if !r.report.Targets[0].NodesUnreachable || !strings.Contains(r.report.Reason, "the nodes cannot reach it") {
			t.Fatalf("got %+v", r.report.Targets[0])
		}
		waitPastWedgedFor()
	}
	if !w.podExists(w.pod.Name) {
		t.Fatal("restarted a scheduler the nodes cannot reach")
	}
	if got := eventNames(webhooks(t, rcv.since(0, webhookPath))); strings.Join(got, ",") != "nodes-unreachable" {
		t.Errorf("alerts %v, want nodes-unreachable once", got)
	}
}

// doctor checks the probe's whole path: ListNodes against the serving nodes, the
// canary's address and write (a server-side dry run: nothing left), and when a
// pass last saw a canary; a scheduler that does not answer is a warning, since
// runs then judge it without the probe.
func TestDoctorChecksTheProbe(t *testing.T) {
	w := newProbeWorld(t)
	createEmptyState(t, w.ns)
	d := runDoctor(t, w.base...)
	if c := d.check(t, "ListNodes of pod "+w.pod.Name); !c.OK || c.Warning || !strings.Contains(c.Detail, "every one of the 3 serving") {
		t.Errorf("ListNodes: %+v", c)
	}
	if c := d.check(t, "canary can be written"); !c.OK || !strings.Contains(c.Detail, "server-side dry run") {
		t.Errorf("canary: %+v", c)
	}
	if c := d.check(t, "last canary seen"); !c.Warning {
		t.Errorf("before any pass: %+v", c)
	}
	if w.canary(t) != nil {
		t.Error("doctor left a canary")
	}
	w.check().expect(t, 0, "healthy", "none")
	if c := runDoctor(t, w.base...).check(t, "last canary seen"); !c.OK || c.Warning || !strings.Contains(c.Detail, "at 20") {
		t.Errorf("after a pass: %+v", c)
	}
	w.grpc.Stop()
	if c := runDoctor(t, w.base...).check(t, "ListNodes of pod "+w.pod.Name); !c.Warning || !strings.Contains(c.Hint, "--scheduler-grpc-port") {
		t.Errorf("no answer: %+v", c)
	}
}

// apiForwarder is the API server's address as the stand-in scheduler sees it: a
// TCP forwarder that can go away (every connection closed, the port refused) and
// come back on the same port, as a restarted API server does.
type apiForwarder struct {
	addr  string
	to    string
	mu    sync.Mutex
	l     net.Listener
	conns []net.Conn
}

func newAPIForwarder(t *testing.T) *apiForwarder {
	u, err := url.Parse(env.Config.Host)
	must(t, err)
	f := &apiForwarder{to: u.Host}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	f.addr = l.Addr().String()
	f.serve(l)
	t.Cleanup(func() { f.down() })
	return f
}

func (f *apiForwarder) serve(l net.Listener) {
	f.mu.Lock()
	f.l = l
	f.mu.Unlock()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", f.to)
			if err != nil {
				c.Close()
				continue
			}
			f.mu.Lock()
			f.conns = append(f.conns, c, up)
			f.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
}

// down closes the listener and every connection.
func (f *apiForwarder) down() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.l.Close()
	for _, c := range f.conns {
		c.Close()
	}
	f.conns = nil
}

// outage is the API server away for d.
func (f *apiForwarder) outage(t *testing.T, d time.Duration) {
	f.down()
	time.Sleep(d)
	l, err := net.Listen("tcp", f.addr)
	must(t, err)
	f.serve(l)
}

// An API-server restart with RBAC intact and no node change: the scheduler's watch
// breaks, the API server is away, then its informer relists only after a delay
// (17-85 s measured; 4 s here, beside a 10 s window). A canary written in that
// time is unseen for a while, then seen: no restart, and no page.
func TestAPIServerRestartIsNotADeadDiscovery(t *testing.T) {
	fwd := newAPIForwarder(t)
	cfg := rest.CopyConfig(env.Config)
	cfg.Host = "https://" + fwd.addr
	viaFwd, err := kubernetes.NewForConfig(cfg)
	must(t, err)
	w := newProbeWorld(t, viaFwd)
	w.disco.RelistDelay = 4 * time.Second
	rcv := newReceiver(t)
	args := append([]string{"--probe-window", "10s", "--confirm-window", "3s", "--sample-interval", "500ms", "--timeout", "20s"}, checkAlertFlags(rcv)...)
	w.check(args...).expect(t, 0, "healthy", "none")

	fwd.outage(t, 2*time.Second)
	r := w.check(args...)
	r.expect(t, 0, "healthy", "none")
	p := r.report.Targets[0].Probe
	t.Logf("probe: %s (%d samples)", p, r.report.Samples)
	if w.disco.Relists.Load() != 1 || r.report.Samples < 2 || !strings.Contains(p, "after it was written") {
		t.Errorf("the pass must have waited out the relist (%d relists, %d samples) and seen its canary: %s", w.disco.Relists.Load(), r.report.Samples, p)
	}
	if !w.podExists(w.pod.Name) {
		t.Fatal("restarted a scheduler whose informer was relisting")
	}
	if got := eventNames(webhooks(t, rcv.since(0, webhookPath))); len(got) > 0 {
		t.Errorf("paged %v for an API-server restart", got)
	}
}
