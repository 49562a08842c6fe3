package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"
)

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

// Addr is where it answers.
func (r *Responder) Addr() string { return r.ln.Addr().String() }

// Close stops answering, letting requests in flight finish for up to a second.
func (r *Responder) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := r.srv.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
