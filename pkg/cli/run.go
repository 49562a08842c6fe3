package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"

	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/loop"
	"github.com/agentenv/watchdog/pkg/metrics"
	"github.com/agentenv/watchdog/pkg/slicewatch"
)

// RunOptions configure the continuous mode.
type RunOptions struct {
	Interval       time.Duration
	MetricsAddr    string
	LeaderElect    bool
	LeaderLease    string
	LeaderIdentity string
	WatchEndpoints bool // an early pass when the nodes' EndpointSlices change
}

// settle is how long an early pass waits after an EndpointSlice change for the rest
// of it: a roll replaces nodes within seconds.
const settle = 2 * time.Second

func (o *RunOptions) AddFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&o.Interval, "interval", 30*time.Second, "time between the starts of two passes")
	fs.StringVar(&o.MetricsAddr, "metrics-addr", ":9102", "address serving the watchdog's own /metrics and /healthz")
	fs.BoolVar(&o.LeaderElect, "leader-elect", false, "elect one active watchdog among replicas through a Lease (set it when replicas > 1)")
	fs.StringVar(&o.LeaderLease, "leader-elect-lease", "agentenv-scheduler-watchdog", "Lease used for the watchdog's own leader election")
	fs.StringVar(&o.LeaderIdentity, "leader-elect-identity", "", "identity in the election (default: the hostname, i.e. the pod name)")
	fs.BoolVar(&o.WatchEndpoints, "watch-endpoints", true, "watch the EndpointSlices of --nodes-service and start a pass 2s after they change (at most one per half --interval), rather than wait for the interval; needs watch endpointslices (false: the plain interval)")
}

// Validate reports every invalid flag, then an Alertmanager alert that would end between two passes.
func (o *RunOptions) Validate(am *AlertmanagerOptions) error {
	var p problems
	if o.Interval < time.Second {
		p.addf("--interval %s is too short (at least 1s)", o.Interval)
	}
	if _, _, err := net.SplitHostPort(o.MetricsAddr); err != nil {
		p.addf("--metrics-addr %q: %v", o.MetricsAddr, err)
	}
	p.add(needLease(o.LeaderElect, o.LeaderLease))
	if len(am.URLs) > 0 && am.TTL <= o.Interval {
		p.addf("--alertmanager-alert-ttl %s must be longer than --interval %s, or open alerts resolve between passes", am.TTL, o.Interval)
	}
	return p.err()
}

// needLease refuses --leader-elect without --leader-elect-lease (run and doctor).
func needLease(elect bool, lease string) error {
	if elect && lease == "" {
		return usagef("--leader-elect needs --leader-elect-lease")
	}
	return nil
}

func newRunCommand(stderr io.Writer) *cobra.Command {
	f := &checkFlags{output: OutputOptions{Output: "text"}} // run prints no report
	var ro RunOptions
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run passes on an interval, with metrics, health and leader election (for a Deployment)",
		Long: `run performs the same pass as check every --interval until SIGTERM, serving its own
Prometheus metrics and /healthz on --metrics-addr. /healthz fails when passes stop
completing (no successful pass for two intervals plus --timeout). With --leader-elect,
replicas elect one active watchdog through a Lease; standbys stay healthy and idle.
State lives in the same ConfigMap as for check, so the two modes can be switched.`,
		Example: `  # One watchdog, a pass every 30 s, metrics and /healthz on :9102.
  watchdog run -n agentenv-system --interval 30s --metrics-addr :9102

  # Several replicas: one active, elected through a Lease; the identity is the pod name.
  watchdog run -n agentenv-system --leader-elect --leader-elect-identity "$POD_NAME"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// run's own flags are declared after check's.
			if err := f.validate(f.evidence.Validate(), ro.Validate(&f.alerts.Alertmanager)); err != nil {
				return err
			}
			if f.validateOnly {
				return f.checkConfig(stderr)
			}
			return runPasses(cmd.Context(), f, &ro, stderr)
		},
	}
	addFlags(cmd, &f.cluster, &f.check, &f.probe, &f.alerts, &f.evidence)
	ro.AddFlags(cmd.Flags())
	addValidateOnlyFlag(cmd.Flags(), &f.validateOnly)
	return cmd
}

// runPasses performs a pass every --interval (while elected) until ctx ends,
// serving the loop's metrics and /healthz.
func runPasses(ctx context.Context, f *checkFlags, ro *RunOptions, stderr io.Writer) error {
	clk := clock.RealClock{}
	p, err := f.setup(stderr, clk)
	if err != nil {
		return err
	}
	log := p.Log
	m := metrics.New(metrics.Options{Sinks: alert.SinkNames(p.Sinks), Runtime: true})
	l := loop.New(ro.Interval, f.cluster.Timeout, p.run, m, clk, log)
	l.DryRun = f.check.DryRun
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if ro.WatchEndpoints {
		w := slicewatch.New(p.obs.Client, f.cluster.Namespace, f.check.NodesService, f.cluster.Timeout, clk, log)
		l.Wake, l.Settle = w.Changes(), settle
		go w.Run(ctx)
	}

	ln, err := net.Listen("tcp", ro.MetricsAddr)
	if err != nil {
		return fmt.Errorf("listen on --metrics-addr %s: %w", ro.MetricsAddr, err)
	}
	srv := newMetricsServer(l.Handler())
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln); cancel() }()
	log.Info().Str("metricsAddr", ln.Addr().String()).Dur("interval", ro.Interval).Bool("leaderElect", ro.LeaderElect).Bool("watchEndpoints", ro.WatchEndpoints).Msg("watchdog running")

	runErr := lead(ctx, l, ro, p, clk)
	shutdownCtx, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		log.Warn().Err(err).Msg("metrics server shutdown")
	}
	if err := <-serveErr; !errors.Is(err, http.ErrServerClosed) {
		if runErr != nil {
			log.Warn().Err(runErr).Msg("leader election stopped with an error")
		}
		runErr = fmt.Errorf("metrics server on %s: %w", ro.MetricsAddr, err)
	}
	log.Info().Msg("watchdog stopped")
	return runErr
}

// lead runs l's passes until ctx ends: at once, or while holding --leader-elect-lease.
func lead(ctx context.Context, l *loop.Loop, ro *RunOptions, p *wired, clk clock.Clock) error {
	if !ro.LeaderElect {
		l.Lead(ctx)
		return nil
	}
	if p.lease != nil && ro.LeaderLease == p.lease.Name {
		p.lease = nil // the election holds it while this replica leads
	}
	e := p.f.elector(p.obs.Client, ro.LeaderLease, ro.LeaderIdentity, clk, p.Log)
	e.OnAttempt = func(bool) { l.Alive() }
	go watchPasses(ctx, l, p, clk)
	return e.Run(ctx, l.Lead)
}

// watchPasses tells l, every interval, whether the state ConfigMap changed: every
// completed non-dry pass writes it, whichever replica leads (a standby's /healthz).
func watchPasses(ctx context.Context, l *loop.Loop, p *wired, clk clock.Clock) {
	seen, lastErr := "", ""
	for ctx.Err() == nil {
		if !l.DryRun { // dry passes write nothing to see
			cm, err := p.obs.Client.GetConfigMap(ctx, p.store.Namespace, p.store.Name)
			switch {
			case apierrors.IsNotFound(err): // no pass wrote it yet: no-pass-anywhere says so
				err = nil
			case err != nil:
				if err.Error() != lastErr && ctx.Err() == nil {
					p.Log.Warn().Err(err).Str("configmap", p.store.Namespace+"/"+p.store.Name).Msg("standby cannot read the state ConfigMap")
				}
			case seen != "" && cm.ResourceVersion != seen:
				l.SawPass()
				fallthrough
			default:
				seen = cm.ResourceVersion
			}
			lastErr = fmt.Sprint(err)
			l.SawState(err)
		}
		l.Healthy() // the gauge says it between two probes too
		select {
		case <-ctx.Done():
		case <-clk.After(l.Interval):
		}
	}
}

// newMetricsServer serves /metrics and /healthz from memory, cutting off a client
// that is slow or quiet, so none can hold connections open in a long-lived run.
func newMetricsServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: 15 * time.Second}
}
