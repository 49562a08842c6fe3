// Command schedsim is the AgentENV scheduler's stand-in on a real node (hack/cluster.sh,
// test/e2e): a small static binary whose metrics follow internal/schedsim's measured
// signatures, plus the other small processes the node needs. One binary, three roles:
//
//	schedsim scheduler [--nodes 3] [--speed 1] [--metrics-addr :9101] [--control-addr :9190]
//	schedsim node      [--addr :8000]     a simulated runtime node (answers /healthz)
//	schedsim pause                        the pod sandbox: sleeps until SIGTERM
//
// The scheduler's control port is what a test uses to break it:
//
//	POST /discovery?state=lost|healthy   lose (or regain) node discovery: DeadRolled
//	POST /slow?delay=10s                 answer scrapes after delay (0 turns it off)
//	POST /fail?status=500                answer scrapes with status (0 turns it off)
//
// A new process (the Deployment's replacement after a restart) starts healthy, as the
// real scheduler does. It logs like one, one line per event, to stdout: the container
// log the watchdog's evidence bundle reads through the kubelet.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/agentenv/watchdog/internal/schedsim"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: schedsim scheduler|node|pause [flags]")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var err error
	switch os.Args[1] {
	case "scheduler":
		err = scheduler(ctx, os.Args[2:])
	case "node":
		err = node(ctx, os.Args[2:])
	case "pause":
		<-ctx.Done()
	default:
		err = fmt.Errorf("unknown role %q: want scheduler, node or pause", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "schedsim:", err)
		os.Exit(1)
	}
}

// faults are the scrape faults the control port sets.
type faults struct {
	mu     sync.Mutex
	delay  time.Duration
	status int
}

func (f *faults) get() (time.Duration, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.delay, f.status
}

func scheduler(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("scheduler", flag.ContinueOnError)
	nodes := fs.Int("nodes", 3, "runtime nodes the scheduler knows")
	speed := fs.Float64("speed", 1, "scheduler seconds per real second (timings of internal/schedsim)")
	metricsAddr := fs.String("metrics-addr", ":9101", "metrics listen address (inside the pod's network namespace)")
	controlAddr := fs.String("control-addr", ":9190", "control listen address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	sim := schedsim.NewSim(*nodes, *speed)
	sim.RestartProcess() // a fresh process: counters at zero, first refresh writes zeros
	var f faults

	metrics := http.NewServeMux()
	metrics.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		delay, status := f.get()
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
		}
		if status != 0 {
			http.Error(w, "scrape failure injected", status)
			return
		}
		sim.ServeHTTP(w, r)
	})
	control := http.NewServeMux()
	control.HandleFunc("POST /discovery", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("state") {
		case "lost":
			sim.Set(schedsim.DeadRolled)
			log.Warn("endpointslice watch: http2: client connection lost")
			log.Info("endpointslice informer: watch closed, not re-established")
		case "healthy":
			sim.Set(schedsim.Healthy)
			log.Info("endpointslice informer: watch re-established")
		default:
			http.Error(w, "state: want lost or healthy", http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	control.HandleFunc("POST /slow", func(w http.ResponseWriter, r *http.Request) {
		d, err := time.ParseDuration(r.URL.Query().Get("delay"))
		if err != nil {
			http.Error(w, "delay: "+err.Error(), http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.delay = d
		f.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	control.HandleFunc("POST /fail", func(w http.ResponseWriter, r *http.Request) {
		s, err := strconv.Atoi(r.URL.Query().Get("status"))
		if err != nil || (s != 0 && (s < 400 || s > 599)) {
			http.Error(w, "status: want 0 or 400-599", http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.status = s
		f.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})

	log.Info("scheduler starting", "nodes", *nodes, "speed", *speed)
	go heartbeats(ctx, log, sim, *nodes)
	return serve(ctx, map[string]http.Handler{*metricsAddr: metrics, *controlAddr: control})
}

// heartbeats logs what the scheduler's heartbeat handler would, every 5 s
// (scheduler time): accepted while discovery works, rejected once it is dead.
func heartbeats(ctx context.Context, log *slog.Logger, sim *schedsim.Sim, nodes int) {
	t := time.NewTicker(sim.Real(5 * time.Second))
	defer t.Stop()
	var lastOK, lastRejected uint64
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		v := sim.Values()
		node := fmt.Sprintf("runtime-%d", i%nodes)
		switch {
		case v.HeartbeatRejected > lastRejected:
			log.Warn("heartbeat rejected: unknown node", "node", node, "code", "InvalidArgument")
		case v.HeartbeatOK > lastOK:
			log.Info("heartbeat accepted", "node", node)
		}
		lastOK, lastRejected = v.HeartbeatOK, v.HeartbeatRejected
	}
}

// node is a simulated runtime node: it answers its port, as a node's agent would.
func node(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	addr := fs.String("addr", ":8000", "listen address (inside the pod's network namespace)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	return serve(ctx, map[string]http.Handler{*addr: mux})
}

// serve runs one server per address until ctx ends, then shuts them down.
func serve(ctx context.Context, handlers map[string]http.Handler) error {
	errs := make(chan error, len(handlers))
	var servers []*http.Server
	for addr, h := range handlers {
		s := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}
		servers = append(servers, s)
		go func() {
			if err := s.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
				errs <- fmt.Errorf("listen %s: %w", s.Addr, err)
			}
		}()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errs:
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range servers {
		_ = s.Shutdown(shutdown)
	}
	return err
}
