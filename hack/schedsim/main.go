// Command schedsim is the AgentENV scheduler's stand-in on a real node (hack/cluster.sh,
// test/e2e): a small static binary whose metrics follow internal/schedsim's measured
// signatures, plus the other small processes the node needs. One binary, three roles:
//
//	schedsim scheduler [--nodes 3] [--speed 1] [--metrics-addr :9101] [--control-addr :9190]
//	                   [--grpc-addr :9090] [--namespace ns] [--nodes-service agentenv-nodes]
//	                   [--nodes-port 8000] [--relist-delay 60s]
//	schedsim node      [--addr :8000]     a simulated runtime node (answers /healthz)
//	schedsim pause                        the pod sandbox: sleeps until SIGTERM
//
// The scheduler's control port is what a test uses to break it:
//
//	POST /discovery?state=lost|healthy   lose (or regain) node discovery: DeadRolled
//	POST /discovery?state=dead           discovery dies while no node changes: ready N, ListNodes frozen
//	POST /discovery?state=unreachable    the nodes stop reaching the scheduler; discovery lives
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
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

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
	grpcAddr := fs.String("grpc-addr", ":9090", "gRPC listen address (ListNodes, Schedule), served from a real discovery in a pod")
	namespace := fs.String("namespace", os.Getenv("POD_NAMESPACE"), "the nodes Service's namespace")
	service := fs.String("nodes-service", "agentenv-nodes", "the nodes Service, whose EndpointSlices discovery watches")
	nodesPort := fs.Int("nodes-port", 8000, "the node port discovery counts")
	relist := fs.Duration("relist-delay", time.Minute, "after the API server went away, how long after it answers again discovery lists (measured 17-85 s)")
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
	disco, err := discovery(ctx, *namespace, *service, int32(*nodesPort), *relist)
	if err != nil {
		return err
	}
	control := http.NewServeMux()
	control.HandleFunc("POST /discovery", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("state") {
		case "lost", "dead": // dead: while no node changes, ready stays N
			if r.URL.Query().Get("state") == "lost" {
				sim.Set(schedsim.DeadRolled)
			}
			disco.Kill()
			log.Warn("endpointslice watch: http2: client connection lost")
			log.Info("endpointslice informer: watch closed, not re-established")
		case "unreachable": // the nodes stop reaching the scheduler; discovery lives
			sim.Set(schedsim.Unreachable)
		case "healthy":
			sim.Set(schedsim.Healthy)
			disco.Kill()
			disco.Start(ctx)
			log.Info("endpointslice informer: watch re-established")
		default:
			http.Error(w, "state: want lost, dead, unreachable or healthy", http.StatusBadRequest)
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

	g := &schedsim.GRPC{Discovery: disco}
	gl, err := net.Listen("tcp", *grpcAddr)
	if err != nil {
		return err
	}
	go func() { _ = g.Serve(gl) }()
	defer g.Stop()

	log.Info("scheduler starting", "nodes", *nodes, "speed", *speed)
	go heartbeats(ctx, log, sim, *nodes)
	return serve(ctx, map[string]http.Handler{*metricsAddr: metrics, *controlAddr: control})
}

// discovery starts the scheduler's node discovery with the pod's credentials.
func discovery(ctx context.Context, ns, service string, port int32, relist time.Duration) (*schedsim.Discovery, error) {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("discovery needs in-cluster credentials: %w", err)
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	d := &schedsim.Discovery{Client: c, Namespace: ns, Service: service, Port: port, RelistDelay: relist}
	d.Start(ctx)
	return d, nil
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
