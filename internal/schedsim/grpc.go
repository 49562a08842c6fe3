package schedsim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
)

// The scheduler's gRPC service as the stand-in serves it, on grpc-go as the real
// scheduler does, with the two messages written by hand (scheduler.proto: Node
// { string node_id = 1; string endpoint = 2; }, ListNodesResponse { repeated Node
// nodes = 1; }, ScheduleResponse { Node node = 1; }).

// rawCodec passes messages through as bytes: each side encodes its own.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// Lister is discovery's snapshot (Discovery), lingering nodes included or not.
type Lister interface {
	Nodes(lingering bool) []SimNode
}

// GRPC serves ListNodes (discovery's snapshot, lingering nodes included) and
// Schedule (round-robin over active nodes only: a terminating endpoint is never
// chosen) from Discovery. NotLeader answers both Unavailable, as an HA standby.
type GRPC struct {
	Discovery Lister
	NotLeader atomic.Bool
	Lists     atomic.Int64 // ListNodes calls answered
	next      atomic.Uint64
	srv       *grpc.Server
}

// Serve answers on l until Stop.
func (g *GRPC) Serve(l net.Listener) error {
	g.srv = grpc.NewServer(grpc.ForceServerCodec(rawCodec{}))
	unary := func(name string, answer func() ([]byte, error)) grpc.MethodDesc {
		return grpc.MethodDesc{MethodName: name, Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			var in []byte
			if err := dec(&in); err != nil {
				return nil, err
			}
			if g.NotLeader.Load() {
				return nil, status.Error(codes.Unavailable, "not the leader")
			}
			out, err := answer()
			return &out, err
		}}
	}
	g.srv.RegisterService(&grpc.ServiceDesc{ServiceName: "scheduler.v1.Scheduler", HandlerType: (*any)(nil), Methods: []grpc.MethodDesc{
		unary("ListNodes", func() ([]byte, error) {
			g.Lists.Add(1)
			var out []byte
			for _, n := range g.Discovery.Nodes(true) {
				out = protowire.AppendTag(out, 1, protowire.BytesType)
				out = protowire.AppendBytes(out, encodeNode(n))
			}
			return out, nil
		}),
		unary("Schedule", func() ([]byte, error) {
			active := g.Discovery.Nodes(false)
			if len(active) == 0 {
				return nil, status.Error(codes.Unavailable, "no schedulable node")
			}
			n := active[g.next.Add(1)%uint64(len(active))]
			return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), encodeNode(n)), nil
		}),
	}}, g)
	return g.srv.Serve(l)
}

// Stop ends Serve.
func (g *GRPC) Stop() {
	if g.srv != nil {
		g.srv.Stop()
	}
}

func encodeNode(n SimNode) []byte {
	b := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), n.ID)
	return protowire.AppendString(protowire.AppendTag(b, 2, protowire.BytesType), n.Endpoint)
}

// Call makes one unary call with grpc-go, as the gateway does, and returns the
// nodes of its answer (ListNodes' list, Schedule's one).
func Call(ctx context.Context, addr, method string) ([]SimNode, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	in, out := []byte{}, []byte{}
	if err := conn.Invoke(ctx, "/scheduler.v1.Scheduler/"+method, &in, &out); err != nil {
		return nil, err
	}
	var nodes []SimNode
	for len(out) > 0 {
		_, _, n := protowire.ConsumeTag(out)
		msg, m := protowire.ConsumeBytes(out[max(n, 0):])
		if n < 0 || m < 0 {
			return nil, errors.New("bad answer")
		}
		out = out[n+m:]
		var node SimNode
		for len(msg) > 0 {
			num, _, k := protowire.ConsumeTag(msg)
			v, l := protowire.ConsumeString(msg[max(k, 0):])
			if k < 0 || l < 0 {
				return nil, errors.New("bad node")
			}
			msg = msg[k+l:]
			switch num {
			case 1:
				node.ID = v
			case 2:
				node.Endpoint = v
			}
		}
		nodes = append(nodes, node)
	}
	return nodes, nil
}

// Gateway is AgentENV's gateway's cluster-wide sandbox list as the real one
// builds it: GET /sandboxes or /v2/sandboxes calls ListNodes, then the same path
// on every node it names, terminating ones included, all at once; the first
// failure fails the list (502 "cluster list unavailable"), a node's 4xx is passed on.
type Gateway struct {
	Scheduler string // the scheduler's gRPC address
	Timeout   time.Duration
}

func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimRight(r.URL.Path, "/")
	if r.Method != http.MethodGet || (path != "/sandboxes" && path != "/v2/sandboxes") {
		http.NotFound(w, r)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), g.Timeout)
	defer cancel()
	nodes, err := Call(ctx, g.Scheduler, "ListNodes")
	if err != nil {
		http.Error(w, "scheduler unavailable: "+err.Error(), http.StatusBadGateway)
		return
	}
	if len(nodes) == 0 {
		http.Error(w, "cluster list unavailable", http.StatusBadGateway)
		return
	}
	var (
		mu    sync.Mutex
		items = []json.RawMessage{}
		first error
		code  int
		wg    sync.WaitGroup
	)
	for _, n := range nodes {
		wg.Go(func() {
			got, status, err := fetch(ctx, n.Endpoint+r.URL.Path)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && first == nil {
				first, code = fmt.Errorf("node %s list failed: %w", n.ID, err), status
				cancel()
			}
			items = append(items, got...)
		})
	}
	wg.Wait()
	switch {
	case first != nil && code >= 400 && code < 500:
		http.Error(w, http.StatusText(code), code)
	case first != nil:
		http.Error(w, "cluster list unavailable: "+first.Error(), http.StatusBadGateway)
	default:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(items)
	}
}

func fetch(ctx context.Context, url string) ([]json.RawMessage, int, error) {
	// url is a node's endpoint from discovery, as the real gateway fetches it: the
	// stand-in's whole point (test addresses only).
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil) //nolint:gosec // see above
	if err != nil {
		return nil, 0, err
	}
	resp, err := http.DefaultClient.Do(req) //nolint:gosec // a node's endpoint, see above; ctx bounds it
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil, resp.StatusCode, fmt.Errorf("status %d", resp.StatusCode)
	}
	var items []json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&items); err != nil {
		return nil, resp.StatusCode, fmt.Errorf("decode upstream response: %w", err)
	}
	return items, resp.StatusCode, nil
}
