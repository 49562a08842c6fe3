package probe

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/agentenv/watchdog/internal/schedsim"
)

type nodes []schedsim.SimNode

func (n nodes) Nodes(lingering bool) []schedsim.SimNode {
	var out []schedsim.SimNode
	for _, x := range n {
		if lingering || !x.Lingering {
			out = append(out, x)
		}
	}
	return out
}

// serve runs a grpc-go server, as the scheduler's, on a loopback port.
func serve(t *testing.T, g *schedsim.GRPC) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(l) }()
	t.Cleanup(g.Stop)
	return l.Addr().String()
}

// The hand-made client against grpc-go: the list, terminating nodes included, and
// every failure a distinct error, never an empty list.
func TestListNodesAgainstGRPCGo(t *testing.T) {
	g := &schedsim.GRPC{Discovery: nodes{{ID: "node-a", Endpoint: "http://198.18.0.2:8000"}, {ID: "probe-1", Endpoint: "http://198.18.0.9:8000", Lingering: true}}}
	addr := serve(t, g)
	c := NewClient()
	got, err := c.ListNodes(context.Background(), addr)
	if err != nil || len(got) != 2 || got[0] != (Node{"node-a", "http://198.18.0.2:8000"}) || got[1].ID != "probe-1" {
		t.Fatalf("got %+v, %v", got, err)
	}
	g.NotLeader.Store(true)
	_, err = c.ListNodes(context.Background(), addr)
	if se, ok := errors.AsType[*StatusError](err); !ok || se.Code != 14 || se.Message != "not the leader" {
		t.Errorf("an HA standby: want Unavailable \"not the leader\", got %v", err)
	}
	// A scheduler without the method: a grpc-go server without the service.
	bare := grpc.NewServer()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = bare.Serve(l) }()
	defer bare.Stop()
	_, err = c.ListNodes(context.Background(), l.Addr().String())
	if se, ok := errors.AsType[*StatusError](err); !ok || se.Code != 12 {
		t.Errorf("want Unimplemented, got %v", err)
	}
}

func TestListNodesFailures(t *testing.T) {
	c := NewClient()
	// Not a gRPC server: HTTP/1 only.
	h1 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "hello") }))
	defer h1.Close()
	if _, err := c.ListNodes(context.Background(), strings.TrimPrefix(h1.URL, "http://")); err == nil {
		t.Error("an HTTP/1 server answered as a scheduler")
	}
	// Nothing listening.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := l.Addr().String()
	l.Close()
	if _, err := c.ListNodes(context.Background(), closed); err == nil {
		t.Error("a closed port answered")
	}
	// Accepts and never answers: bounded by the caller's deadline (CallTimeout at most).
	hang, _ := net.Listen("tcp", "127.0.0.1:0")
	defer hang.Close()
	go func() {
		for {
			conn, err := hang.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	began := time.Now()
	if _, err := c.ListNodes(ctx, hang.Addr().String()); err == nil || time.Since(began) > CallTimeout {
		t.Errorf("a hung scheduler: %v after %s", err, time.Since(began))
	}
}

func TestDecodeNodesRejectsBadFrames(t *testing.T) {
	for _, frame := range [][]byte{nil, {1, 0, 0, 0, 0}, {0, 0, 0, 0, 9}, {0, 0, 0, 0, 2, 0x0a, 0x05}} {
		if _, err := decodeNodes(frame); err == nil {
			t.Errorf("%v decoded", frame)
		}
	}
}

// The responder answers the gateway's list calls as an empty node, fast; anything
// else 404 (the gateway makes no other call to a node ListNodes names).
func TestResponder(t *testing.T) {
	r, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for path, want := range map[string]int{"/sandboxes": 200, "/v2/sandboxes/?state=running&limit=5": 200, "/sandboxes//": 200, "/nodes": 404, "/sandboxes/abc": 404} {
		resp, err := http.Get("http://" + r.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want || (want == 200 && strings.TrimSpace(string(body)) != "[]") {
			t.Errorf("GET %s: %d %q", path, resp.StatusCode, body)
		}
	}
	resp, err := http.Post("http://"+r.Addr()+"/sandboxes", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("POST /sandboxes: %d, want 404", resp.StatusCode)
	}
}

// BenchmarkListNodesClients compares what one pass pays for its ListNodes call (a
// new client, one call, against a grpc-go server with 20 nodes): this package's
// client over net/http, and grpc-go's (docs/performance.md, "The discovery
// probe's gRPC client").
func BenchmarkListNodesClients(b *testing.B) {
	var n nodes
	for i := range 20 {
		n = append(n, schedsim.SimNode{ID: "node-" + string(rune('a'+i)), Endpoint: "http://198.18.0.2:8000"})
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	g := &schedsim.GRPC{Discovery: n}
	go func() { _ = g.Serve(l) }()
	defer g.Stop()
	addr := l.Addr().String()
	b.Run("net/http", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c := NewClient()
			if got, err := c.ListNodes(context.Background(), addr); err != nil || len(got) != 20 {
				b.Fatal(got, err)
			}
			c.http.CloseIdleConnections()
		}
	})
	b.Run("grpc-go", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if got, err := schedsim.Call(context.Background(), addr, "ListNodes"); err != nil || len(got) != 20 {
				b.Fatal(got, err)
			}
		}
	})
}

// Addr is where it answers.
func (r *Responder) Addr() string { return r.ln.Addr().String() }
