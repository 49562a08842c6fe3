package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/kube"
)

// Mode is --discovery-probe.
type Mode string

const (
	Off    Mode = "off"
	List   Mode = "list"   // compare ListNodes with the serving nodes; writes nothing
	Canary Mode = "canary" // and keep a canary moving through discovery
)

// Bounds: a live discovery shows the canary 0.1-0.3 s after its write, so the first
// reading polls up to settle; its delete has its own time on every exit.
const (
	settle       = 2 * time.Second
	linger       = 500 * time.Millisecond // for a gateway's call in flight
	pollEvery    = 100 * time.Millisecond
	writeTimeout = 10 * time.Second
)

// Prober reads the judged pods' ListNodes in each sample and, in canary mode, keeps one canary per
// pass: written at Begin (its Responder answering), deleted once every judged process showed it, or at End.
type Prober struct {
	Mode      Mode
	Client    *kube.Client
	Namespace string
	Name      string // the canary EndpointSlice
	Service   string // its kubernetes.io/service-name: the nodes Service
	Port      int32  // the nodes port: discovery's and the canary's answering port
	Address   string // the canary's IP: this watchdog's pod IP, or --probe-address
	GRPCPort  int
	Owner     *metav1.OwnerReference // this watchdog's pod: the GC removes a canary left behind
	Write     bool                   // false in a dry run, which writes no canary
	Clock     clock.Clock
	RPC       *Client

	mu     sync.Mutex
	canary *written
	judged []string // where the judged pods' ListNodes were last called
}

// written is the pass's canary.
type written struct {
	node     string // its targetRef name: the node id ListNodes shows
	uid, rv  string
	at       time.Time
	err      error // not written, or lost
	answerer *Responder
	seen     map[string]bool // by pod UID, shown to a process started before it
}

// Begin writes the pass's canary (canary mode, not a dry run), responder first; a failure is
// the canary's Err in every reading: unknown, never bad.
func (p *Prober) Begin(ctx context.Context) {
	if p.Mode == Canary && p.Write {
		p.canary = p.write(ctx)
	}
}

func (p *Prober) write(ctx context.Context) *written {
	node := fmt.Sprintf("%s-%d", p.Name, p.Clock.Now().UnixNano())
	w := &written{node: node, seen: map[string]bool{}}
	r, ip, err := p.answer()
	if err == nil {
		w.answerer = r
		ctx, cancel := context.WithTimeout(ctx, writeTimeout)
		defer cancel()
		var s *discoveryv1.EndpointSlice
		if err = p.Client.DeleteEndpointSlice(ctx, p.Namespace, p.Name, metav1.DeleteOptions{}); apierrors.IsNotFound(err) || err == nil { // a leftover
			s, err = p.Client.CreateEndpointSlice(ctx, p.object(node, ip), metav1.CreateOptions{})
		}
		if err == nil {
			w.uid, w.rv, w.at = string(s.UID), s.ResourceVersion, p.Clock.Now()
			return w
		}
		_ = w.answerer.Close()
		err = fmt.Errorf("EndpointSlice %s/%s: %w", p.Namespace, p.Name, err)
	}
	w.err = fmt.Errorf("not written: %w", err)
	return w
}

// answer starts a Responder on the canary's address, which it returns parsed.
func (p *Prober) answer() (*Responder, net.IP, error) {
	ip := net.ParseIP(p.Address)
	if ip == nil {
		return nil, nil, fmt.Errorf("no canary address (--probe-address, or the pod IP) %q", p.Address)
	}
	r, err := Listen(net.JoinHostPort(p.Address, strconv.Itoa(int(p.Port))))
	return r, ip, err
}

// object is the canary: one serving, terminating (never scheduled) endpoint of a pod that need not exist.
func (p *Prober) object(node string, ip net.IP) *discoveryv1.EndpointSlice {
	yes, no, tcp := true, false, corev1.ProtocolTCP
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: map[string]string{
			discoveryv1.LabelServiceName: p.Service, "app.kubernetes.io/managed-by": kube.ManagedBy,
			discoveryv1.LabelManagedBy: kube.ManagedBy}}, // the EndpointSlice controller leaves it alone
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Port: &p.Port, Protocol: &tcp}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{p.Address},
			Conditions: discoveryv1.EndpointConditions{Ready: &no, Serving: &yes, Terminating: &yes},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: node}}},
	}
	if ip.To4() == nil {
		s.AddressType = discoveryv1.AddressTypeIPv6
	}
	if p.Owner != nil {
		s.OwnerReferences = []metav1.OwnerReference{*p.Owner}
	}
	return s
}

// Read gives each judged pod its reading in turn (they share the canary), retiring the canary
// once every judged process showed it.
func (p *Prober) Read(ctx context.Context, obs *decide.Observation, sel decide.Selection) {
	if p.Mode == Off || p.Mode == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.canary; c != nil && c.err != nil && c.uid != "" { // lost: a fresh one
		_ = p.end(c)
		p.canary = p.write(ctx)
	}
	obs.Probing = true
	judged, _, _ := decide.Judged(*obs, sel)
	p.judged = p.judged[:0]
	for _, j := range judged {
		p.judged = append(p.judged, p.AddrOf(j))
	}
	c, done := p.canary, len(judged) > 0
	for i := range obs.Pods {
		pod := &obs.Pods[i]
		if !slices.ContainsFunc(judged, func(j decide.Pod) bool { return j.UID == pod.UID }) {
			continue
		}
		pod.Probe = p.read(ctx, *pod)
		if r := pod.Probe.Canary; r != nil && r.Seen && !c.at.Before(pod.StartedAt) {
			c.seen[pod.UID] = true
		}
		done = done && c != nil && c.err == nil && c.seen[pod.UID]
	}
	if done {
		_ = p.end(c) // its work is done
		p.canary = nil
	}
}

// read calls the pod's ListNodes, polling briefly after the canary's write for it to show, and
// verifies an unseen canary is still the object written.
func (p *Prober) read(ctx context.Context, pod decide.Pod) *decide.ProbeReading {
	addr := p.AddrOf(pod)
	r := &decide.ProbeReading{}
	if pod.IP == "" {
		r.At, r.Err = p.Clock.Now(), errors.New("the pod has no IP")
		return r
	}
	c := p.canary
	for {
		nodes, err := p.RPC.ListNodes(ctx, addr)
		r.At, r.Err, r.Nodes = p.Clock.Now(), err, nil
		for _, n := range nodes {
			r.Nodes = append(r.Nodes, n.ID)
		}
		if err != nil || c == nil {
			return r
		}
		r.Canary = &decide.CanaryReading{Name: c.node, WrittenAt: c.at, Err: c.err}
		for _, n := range nodes {
			r.Canary.Seen = r.Canary.Seen || n.ID == c.node
		}
		if c.err != nil || r.Canary.Seen || p.Clock.Since(c.at) >= settle {
			break
		}
		select {
		case <-ctx.Done():
			return r
		case <-p.Clock.After(pollEvery):
		}
	}
	if !r.Canary.Seen {
		r.Canary.Err = p.verify(ctx, c)
	}
	return r
}

// verify reports a canary that is no longer the object written (its absence from
// ListNodes proves nothing); a failed read is this sample's error only.
func (p *Prober) verify(ctx context.Context, c *written) error {
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	s, err := p.Client.GetEndpointSlice(ctx, p.Namespace, p.Name)
	switch {
	case apierrors.IsNotFound(err):
		err = errors.New("deleted by someone else")
	case err != nil: // unknown for this sample only: the canary is not lost
		return fmt.Errorf("EndpointSlice %s/%s cannot be read back: %w", p.Namespace, p.Name, err)
	case string(s.UID) != c.uid || s.ResourceVersion != c.rv:
		err = fmt.Errorf("changed by someone else (resourceVersion %s, written %s)", s.ResourceVersion, c.rv)
	}
	if err != nil {
		c.err = fmt.Errorf("EndpointSlice %s/%s %w", p.Namespace, p.Name, err)
	}
	return c.err
}

// End removes the canary, on every exit path, in its own time.
func (p *Prober) End() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.canary
	p.canary = nil
	return p.end(c)
}

// end deletes the canary written, only it (UID precondition), and answers until the
// judged schedulers no longer list it (the gateway may call a node just listed).
func (p *Prober) end(c *written) error {
	if c == nil || c.answerer == nil {
		return nil
	}
	var err error
	if c.uid != "" {
		ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
		defer cancel()
		uid := types.UID(c.uid)
		err = p.Client.DeleteEndpointSlice(ctx, p.Namespace, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			err = fmt.Errorf("delete the canary EndpointSlice %s/%s: %w", p.Namespace, p.Name, err)
		} else {
			err = p.awaitGone(c)
		}
	}
	if cerr := c.answerer.Close(); err == nil {
		err = cerr
	}
	return err
}

// awaitGone polls the judged schedulers' ListNodes until none lists the canary.
func (p *Prober) awaitGone(c *written) error {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	for _, addr := range p.judged {
		for {
			nodes, err := p.RPC.ListNodes(ctx, addr)
			if err != nil || !slices.ContainsFunc(nodes, func(n Node) bool { return n.ID == c.node }) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("the scheduler at %s still lists canary %s %s after its deletion: its discovery missed the delete, and the gateway's cluster-wide lists fail while it does", addr, c.node, writeTimeout)
			case <-p.Clock.After(pollEvery):
			}
		}
	}
	<-p.Clock.After(linger)
	return nil
}

// AddrOf is where the pod's ListNodes is called.
func (p *Prober) AddrOf(pod decide.Pod) string {
	return net.JoinHostPort(pod.IP, strconv.Itoa(p.GRPCPort))
}

// Preflight tries what a canary needs, leaving nothing behind: answering on its address, and its
// create as a server-side dry run (`watchdog doctor`).
func (p *Prober) Preflight(ctx context.Context) error {
	r, ip, err := p.answer()
	if err != nil {
		return err
	}
	_ = r.Close()
	_, err = p.Client.CreateEndpointSlice(ctx, p.object(p.Name+"-preflight", ip), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil && !apierrors.IsAlreadyExists(err) { // one exists: a pass is probing now
		return fmt.Errorf("create EndpointSlice %s/%s (server-side dry run): %w", p.Namespace, p.Name, err)
	}
	return nil
}

// Responder answers, as a node with no sandbox, the calls AgentENV's gateway makes
// to every node ListNodes names for its cluster-wide sandbox lists (GET /sandboxes
// and /v2/sandboxes): an unanswered canary would make those lists fail (502).
type Responder struct {
	srv *http.Server
	ln  net.Listener
}

// Listen starts answering on addr (host:port).
func Listen(addr string) (*Responder, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("answer the canary's node API on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		switch strings.TrimRight(r.URL.Path, "/") {
		case "/sandboxes", "/v2/sandboxes":
			if r.Method == http.MethodGet {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte("[]\n"))
				return
			}
		}
		http.NotFound(w, r)
	})
	s := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 10 * time.Second, IdleTimeout: 30 * time.Second, MaxHeaderBytes: 64 << 10}
	go func() { _ = s.Serve(ln) }()
	return &Responder{srv: s, ln: ln}, nil
}

// Close stops answering, letting requests in flight finish for up to a second.
func (r *Responder) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := r.srv.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
