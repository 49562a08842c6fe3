package cli

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/check"
	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/events"
	"github.com/agentenv/watchdog/pkg/evidence"
	"github.com/agentenv/watchdog/pkg/kube"
	"github.com/agentenv/watchdog/pkg/leader"
	"github.com/agentenv/watchdog/pkg/metrics"
	"github.com/agentenv/watchdog/pkg/observe"
	"github.com/agentenv/watchdog/pkg/restart"
	"github.com/agentenv/watchdog/pkg/scrape"
	"github.com/agentenv/watchdog/pkg/state"
	"github.com/agentenv/watchdog/pkg/statestore"
)

// checkFlags are all the options of a pass.
type checkFlags struct {
	cluster      ClusterOptions
	check        CheckOptions
	probe        ProbeOptions
	job          JobOptions
	alerts       AlertOptions
	output       OutputOptions
	evidence     EvidenceOptions
	push         PushOptions // check only: run serves its metrics
	validateOnly bool
}

// validate reports every invalid flag in declaration order, then more (the command's own).
func (f *checkFlags) validate(more ...error) error {
	var p problems
	p.add(f.cluster.Validate(), f.check.Validate(f.cluster.Timeout), f.probe.Validate(), f.job.Validate(), f.alerts.Validate(), f.output.Validate())
	p.add(more...)
	return p.err()
}

func newCheckCommand(stdout, stderr io.Writer) *cobra.Command {
	f := &checkFlags{}
	cmd := &cobra.Command{
		Use:   "check",
		Short: "One pass: observe every scheduler pod, decide, act, persist",
		Long: `check observes every scheduler pod once (sampling again for --confirm-window while a
strong-evidence wedge is being confirmed), decides, restarts if every gate agrees,
alerts, and records the outcome in the state ConfigMap.

Exit codes: 0 the run completed, whatever it found; 1 the watchdog could not do its job
(the message names what failed); 2 bad usage or configuration.`,
		Example: `  # What would it do right now? Observes and decides for real; writes, deletes and sends nothing.
  watchdog check -n agentenv-system --dry-run

  # One real pass from a laptop, its report as JSON for jq.
  watchdog check --context prod-eu1 -n agentenv-system -o json | jq '.verdict, .action'

  # As the CronJob runs it: settings from WATCHDOG_* variables, in-cluster credentials.
  WATCHDOG_NAMESPACE=agentenv-system watchdog check --output=json

  # Is this configuration valid? Exit 0, or 2 with the error; no API call, nothing sent.
  WATCHDOG_NAMESPACE=agentenv-system watchdog check --validate-only`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(f.evidence.Validate(), f.push.Validate()); err != nil {
				return err
			}
			if f.validateOnly {
				return f.checkConfig(stderr)
			}
			// One P: the pass waits on the network; more add idle spinning (docs/performance.md).
			if os.Getenv("GOMAXPROCS") == "" {
				runtime.GOMAXPROCS(1)
			}
			clk, ok := cmd.Context().Value(clockKey{}).(clock.Clock)
			if !ok {
				clk = clock.RealClock{}
			}
			p, err := f.setup(stderr, clk)
			if err != nil {
				return err
			}
			deadline, late, capped := f.job.Deadline(clk.Now(), f.cluster.Timeout)
			if capped {
				p.Log.Warn().Str("job", f.job.Name).Dur("startedLate", late).Time("deadline", deadline).
					Msg("the Job's pod started late: the run ends before the Job's activeDeadlineSeconds, not --timeout after its start")
			}
			ctx, cancel := context.WithDeadline(cmd.Context(), deadline)
			defer cancel()
			start := clk.Now()
			rep, runErr := p.run(ctx)
			// Its own deadline: a pass that used all of --timeout still reports; a skipped one has nothing to.
			sinks, skip := alert.SinkNames(p.Sinks), f.check.DryRun || rep.Skipped
			if err := f.push.push(cmd.Context(), rep, runErr, clk.Since(start), sinks, skip, p.store); err != nil {
				p.Log.Warn().Str("error", err.Error()).Msg("metrics push failed")
				rep.Warnings = append(rep.Warnings, err.Error())
			}
			if err := f.output.print(stdout, rep, rep.WriteText); err != nil {
				return fmt.Errorf("print report: %w", err)
			}
			return runErr
		},
	}
	addFlags(cmd, &f.cluster, &f.check, &f.probe, &f.job, &f.alerts, &f.output, &f.evidence, &f.push)
	addValidateOnlyFlag(cmd.Flags(), &f.validateOnly)
	return cmd
}

// wired is a check.Runner wired from the flags, with what its caller needs: the
// observer, the state (for the pushed totals) and the pass Lease (nil: a dry run,
// or a run whose election holds it).
type wired struct {
	*check.Runner
	f     *checkFlags
	obs   *observe.Observer
	store *statestore.Store
	lease *leader.Elector
	keyed bool // the key Secret's key is in use
}

// leaseWait: more than a dead holder's Lease lasts (15 s), short of any pass's deadline.
const leaseWait = 30 * time.Second

// run is one pass under the Lease (nothing, successfully, after leaseWait), then the heartbeat ping;
// its error names the API server.
func (p *wired) run(ctx context.Context) (rep *check.Report, err error) {
	p.useKey(ctx)
	if p.lease == nil {
		rep, err = p.Run(ctx)
	} else {
		held, herr := p.lease.Hold(ctx, leaseWait, func(ctx context.Context) { rep, err = p.Run(ctx) })
		switch {
		case herr != nil:
			// Fail open: a watchdog that cannot take its Lease (its Role lacks it, the
			// API refuses) still guards; a concurrent write then ends a pass instead.
			p.Log.Warn().Err(herr).Msg("cannot hold the pass Lease: running without it")
			rep, err = p.Run(ctx)
			rep.Warnings = append(rep.Warnings, "ran without the pass Lease: "+herr.Error())
		case !held:
			p.Log.Info().Str("lease", p.lease.Name).Str("holder", p.lease.Holder()).Dur("waited", leaseWait).
				Msg("another pass holds the Lease: this one ends without observing or acting")
			return &check.Report{Time: p.Clock.Now().UTC(), Namespace: p.Source.Namespace, Skipped: true,
				Verdict: state.VerdictUnknown, Action: state.ActionNone, Reason: "another pass holds Lease " + p.lease.Name}, nil
		}
	}
	p.warnUnsigned(rep)
	if (err != nil || len(rep.Targets) == 0) && kube.NamespaceMissing(ctx, p.obs.Client, p.f.cluster.Namespace) {
		err = fmt.Errorf("namespace %s does not exist (--namespace, WATCHDOG_NAMESPACE)", p.f.cluster.Namespace)
	}
	pingHeartbeat(ctx, &p.f.alerts, err, p.f.check.DryRun, p.Log)
	if err != nil {
		err = fmt.Errorf("API server %s: %w", p.obs.APIServer, err)
	}
	return rep, err
}

// warnUnsigned warns on every run that the webhook's requests are unsigned
// (docs/alerts.md, "Signature": refusing would break 0.1.0 installs).
func (p *wired) warnUnsigned(rep *check.Report) {
	if a := p.f.alerts; a.WebhookURL != "" && a.WebhookSecret == "" && rep != nil {
		const w = "--webhook-url without --webhook-secret: the webhook's requests are unsigned, and its receiver cannot tell them from anyone's"
		p.Log.Warn().Msg(w)
		rep.Warnings = append(rep.Warnings, w)
	}
}

// useKey seals the state and evidence with sealKey's key: a dry run only reads the
// Secret, and a pass that cannot (an older Role, a person without the right) still
// does its job, with --outbox-key.
func (p *wired) useKey(ctx context.Context) {
	if p.keyed {
		return
	}
	key, keyed, err := p.f.evidence.sealKey(ctx, p.obs.Client, p.f.cluster.Namespace, !p.f.check.DryRun)
	if err != nil {
		p.Log.Warn().Str("secret", p.f.evidence.KeySecret).Str("error", err.Error()).
			Msg("the key Secret is out of reach: sealing with --outbox-key")
	}
	p.store.Key, p.Evidence.Key, p.keyed = key, key, keyed
}

// setup wires a pass of validated flags on clk: logger, API client, sinks, runner.
func (f *checkFlags) setup(stderr io.Writer, clk clock.Clock) (*wired, error) {
	log := newLogger(&f.cluster, stderr)
	opts := f.options()
	o, err := f.observer(clk)
	if err != nil {
		return nil, err
	}
	ns, client := f.cluster.Namespace, o.Client
	sinks, hold, err := buildSinks(&f.alerts, ns, func(err error) {
		log.Warn().Str("sink", "alertmanager").Str("error", err.Error()).Msg("an Alertmanager peer refused the alerts; another accepted them")
	})
	if err != nil {
		return nil, err
	}
	hostname, _ := os.Hostname()
	var restarter restart.Restarter = restart.Deleter{Client: client, Namespace: ns}
	if f.check.RestartMethod == decide.MethodRollout {
		restarter = restart.Rollout{Client: client, Namespace: ns, Deployment: f.check.Deployment, Now: clk.Now}
	}
	keeper := &evidence.Keeper{ConfigMaps: client, Namespace: ns, ConfigMap: f.evidence.ConfigMap,
		Container: f.check.SchedulerContainer, Key: []byte(f.evidence.OutboxKey)}
	if f.evidence.Logs {
		keeper.Logs = client
	}
	opts.ScrapeVia = o.Via
	store := &statestore.Store{Client: client, Namespace: ns, Name: f.cluster.StateConfigMap,
		Key: []byte(f.evidence.OutboxKey)}
	var prober check.Prober
	if pr := f.prober(o, clk, log); pr != nil {
		prober = pr
	}
	return &wired{Runner: &check.Runner{
		Options:   opts,
		Observer:  o,
		Store:     store,
		Restarter: restarter,
		Events:    &events.Recorder{Client: client, Namespace: ns, Host: hostname, Now: clk.Now},
		Sinks:     sinks,
		Evidence:  keeper,
		Hold:      hold,
		Prober:    prober,
		Clock:     clk,
		Log:       log,
	}, f: f, obs: o, store: store, lease: f.passLease(client, log)}, nil
}

// passLease is the Lease a non-dry pass holds.
func (f *checkFlags) passLease(client *kube.Client, log zerolog.Logger) *leader.Elector {
	if f.check.DryRun {
		return nil
	}
	// The wall clock, the API server's: renewals must not move a pass's virtual clock (tests).
	e, suffix := f.elector(client, f.cluster.Lease, f.probe.PodName, clock.RealClock{}, log), make([]byte, 4)
	// Unique per pass: passes of one process (tests) must not take each other for the holder.
	_, _ = rand.Read(suffix)
	e.Identity = fmt.Sprintf("%s-%d-%x", e.Identity, os.Getpid(), suffix)
	return e
}

// elector elects through Lease name in --namespace, as identity (default: the hostname).
func (f *checkFlags) elector(client *kube.Client, name, identity string, clk clock.Clock,
	log zerolog.Logger,
) *leader.Elector {
	if identity == "" {
		identity, _ = os.Hostname()
	}
	return &leader.Elector{Namespace: f.cluster.Namespace, Name: name, Identity: identity,
		Client: client, Clock: clk, Log: log}
}

// observer is what a pass (and doctor) reads: objects, and metrics by --scrape-via, bounded alike.
func (f *checkFlags) observer(clk clock.PassiveClock) (*observe.Observer, error) {
	client, cfg, err := newClient(&f.cluster)
	if err != nil {
		return nil, err
	}
	o, ns := &f.check, f.cluster.Namespace
	via, _ := scrape.ParseVia(o.ScrapeVia) // validated
	via = via.Resolve(inPod())
	var scraper *scrape.Scraper
	if via == scrape.ViaDirect {
		scraper = scrape.NewScraper(o.ScrapeTimeout, o.MetricsMaxBytes)
	} else {
		proxyCfg := cfg
		if f.runsVia() == scrape.ViaDirect { // --as a ServiceAccount: it needs no right to scrape, we reach the pod with ours
			proxyCfg = rest.CopyConfig(cfg)
			proxyCfg.Impersonate = rest.ImpersonationConfig{}
		}
		rt, err := rest.TransportFor(proxyCfg)
		if err != nil {
			return nil, usagef("--scrape-via apiserver: transport to %s: %v", cfg.Host, err)
		}
		scraper = scrape.NewProxiedScraper(rt, o.ScrapeTimeout, o.MetricsMaxBytes)
	}
	return &observe.Observer{
		Client:      client,
		Namespace:   ns,
		Selector:    o.SchedulerSelector,
		Container:   o.SchedulerContainer,
		Endpoints:   observe.EndpointLister{Client: client, Namespace: ns, Service: o.NodesService, Port: int32(o.NodesPort)},
		Scraper:     scraper,
		Via:         via,
		APIServer:   cfg.Host,
		MetricsPort: o.MetricsPort,
		MetricsPath: o.MetricsPath,
		Deployment:  o.Deployment,
		Reads:       observe.Reads{Selection: o.Selection, Rollout: o.RestartMethod == decide.MethodRollout},
		Clock:       clk,
	}, nil
}

// runsVia is how the runs of the identity checked scrape: --scrape-via resolved
// where they run, in a pod for a ServiceAccount's (--as system:serviceaccount:...).
func (f *checkFlags) runsVia() scrape.Via {
	via, _ := scrape.ParseVia(f.check.ScrapeVia) // validated
	return via.Resolve(inPod() || strings.HasPrefix(f.cluster.Overrides.AuthInfo.Impersonate, "system:serviceaccount:"))
}

// options is the pass's configuration from the flags, for check, run and backtest.
func (f *checkFlags) options() check.Options {
	d := f.check.Config
	d.ClaimTimeout = f.cluster.Timeout
	if d.BackoffBase > 0 { // --restart-backoff 0 turns the back-off off
		d.IneffectiveWithin = decide.DefaultIneffectiveWithin
	}
	d.BackoffReset = decide.DefaultBackoffReset
	d.ProbeWindow = f.probe.window()
	return check.Options{
		Decide: d,
		Alerts: alert.PlanConfig{
			RealertInterval: f.alerts.RealertInterval,
			BlindAfter:      f.alerts.BlindAfter,
			WedgedFor:       f.check.WedgedFor,
		},
		Mode:           f.check.mode(),
		Source:         f.alerts.source(f.cluster.Namespace),
		SampleInterval: f.check.SampleInterval,
		StateConfigMap: f.cluster.StateConfigMap,
	}
}

func addValidateOnlyFlag(fs *pflag.FlagSet, v *bool) {
	fs.BoolVar(v, "validate-only", false, "parse and validate every flag and environment variable, build the API "+
		"client and the alert sinks, then exit: 0 if the configuration is valid, 2 with the error if not; "+
		"makes no API call and sends nothing")
}

// checkConfig builds what a pass needs without a network call: logger, API client,
// sinks. With no client configuration at all (CI checking a values file) the client
// is unchecked; a named or found but broken kubeconfig is an error.
func (f *checkFlags) checkConfig(stderr io.Writer) error {
	log := newLogger(&f.cluster, stderr)
	apiServer := "not checked: no kubeconfig (--kubeconfig, $KUBECONFIG, ~/.kube/config) and not in a pod"
	_, cfg, err := newClient(&f.cluster)
	switch {
	case err == nil:
		apiServer = cfg.Host
	case !errors.Is(err, errNoKubeconfig) || f.cluster.explicitConfig():
		return err
	}
	if _, _, err := buildSinks(&f.alerts, f.cluster.Namespace, nil); err != nil {
		return err
	}
	log.Info().Str("apiServer", apiServer).Str("namespace", f.cluster.Namespace).Str("restartMethod", f.check.RestartMethod).
		Msg("configuration is valid (--validate-only: no API call made, nothing sent)")
	return nil
}

// EvidenceOptions say where the evidence of each restart goes (pkg/evidence), and
// what seals it and the state.
type EvidenceOptions struct {
	ConfigMap string
	Logs      bool
	OutboxKey string // seals the state and evidence until --key-secret holds a key
	KeySecret string // the Secret holding the key (kube.EnsureKey)
}

func (o *EvidenceOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.ConfigMap, "evidence-configmap", "agentenv-scheduler-watchdog-evidence", "ConfigMap keeping the evidence of the newest restarts (created when missing, if the watchdog may)")
	fs.BoolVar(&o.Logs, "evidence-logs", true, "save the last 200 lines (64 KiB at most) of the scheduler container's log before a restart (needs get pods/log)")
	fs.StringVar(&o.OutboxKey, "outbox-key", "", "key (at least 32 random bytes) sealing the whole state document and "+
		"the evidence bundles when --key-secret holds none yet: it seeds that Secret (0.1.0's chart generated one; secret)")
	fs.StringVar(&o.KeySecret, "key-secret", "agentenv-scheduler-watchdog-key", "Secret (data key \"key\") holding "+
		"the key that seals the state and evidence bundles: created by the first pass that is not a dry run "+
		"(from --outbox-key if set, else 32 random bytes); \"\" uses --outbox-key alone")
}

func (o *EvidenceOptions) Validate() error {
	var p problems
	p.name("--evidence-configmap", o.ConfigMap, validation.IsDNS1123Subdomain)
	p.key("--outbox-key", o.OutboxKey)
	if o.KeySecret != "" {
		p.name("--key-secret", o.KeySecret, validation.IsDNS1123Subdomain)
	}
	return p.err()
}

// sealKey is the key sealing the state and evidence bundles: --key-secret's (created
// when create: kube.EnsureKey, seeded from --outbox-key), else --outbox-key, as in 0.1.0.
func (o *EvidenceOptions) sealKey(ctx context.Context, c *kube.Client, ns string, create bool) (
	key []byte, fromSecret bool, err error,
) {
	if o.KeySecret != "" && create {
		key, err = kube.EnsureKey(ctx, c, ns, o.KeySecret, []byte(o.OutboxKey))
	} else if o.KeySecret != "" {
		key, err = kube.ReadKey(ctx, c, ns, o.KeySecret)
	}
	if key == nil {
		return []byte(o.OutboxKey), false, err
	}
	return key, true, err
}

type clockKey struct{}

// WithClock returns ctx carrying the clock `watchdog check` runs its pass on: tests
// replay runs on a virtual clock against a real API server, whatever the load.
func WithClock(ctx context.Context, clk clock.Clock) context.Context {
	return context.WithValue(ctx, clockKey{}, clk)
}

// JobOptions tell a check which CronJob run it is, so that it ends before the Job's
// activeDeadlineSeconds (counted from the Job's start) even when its pod started late.
type JobOptions struct {
	Name           string        // from the pod's batch.kubernetes.io/job-name label
	ActiveDeadline time.Duration // zero: unknown
}

// JobKillMargin is kept before the Job's deadline to report a failure (> pkg/check's budgets) and exit.
const JobKillMargin = 30 * time.Second

func (o *JobOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Name, "job-name", "", "name of the CronJob's Job this run is (the chart sets it); with --job-active-deadline, the run ends before the Job's deadline however late its pod started")
	fs.DurationVar(&o.ActiveDeadline, "job-active-deadline", 0, "the Job's activeDeadlineSeconds, as a duration (0: unknown)")
}

func (o *JobOptions) Validate() error {
	if o.ActiveDeadline != 0 && o.ActiveDeadline <= JobKillMargin {
		return usagef("--job-active-deadline %s: must be longer than %s (what a run keeps to report and exit before the Job is killed), or 0", o.ActiveDeadline, JobKillMargin)
	}
	return nil
}

// Deadline is when a run started at start must end: --timeout after its start, or
// JobKillMargin before its Job's earliest kill, scheduled + activeDeadlineSeconds
// (a CronJob names each Job <cronjob>-<scheduled minutes since the epoch>; a name
// without a plausible one, a Job made by hand, leaves --timeout alone). late is how
// long after its scheduled time the run started, when known.
func (o *JobOptions) Deadline(start time.Time, timeout time.Duration) (deadline time.Time, late time.Duration, capped bool) {
	deadline = start.Add(timeout)
	i := strings.LastIndexByte(o.Name, '-')
	if o.ActiveDeadline <= 0 || i < 0 {
		return deadline, 0, false
	}
	minutes, err := strconv.ParseInt(o.Name[i+1:], 10, 64)
	scheduled := time.Unix(minutes*60, 0)
	// Plausible: no later than start (a minute of skew allowed), and the Job can still be running.
	if err != nil || minutes <= 0 || minutes > start.Unix()/60+1 || start.Sub(scheduled) > o.ActiveDeadline {
		return deadline, 0, false
	}
	late = max(start.Sub(scheduled), 0)
	if jobEnd := scheduled.Add(o.ActiveDeadline - JobKillMargin); jobEnd.Before(deadline) {
		return jobEnd, late, true
	}
	return deadline, late, false
}

// PushOptions send a check's metrics to a Pushgateway (a CronJob has no process to scrape).
type PushOptions struct {
	URL      string
	Job      string
	Grouping map[string]string
	Timeout  time.Duration
}

func (o *PushOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.URL, "pushgateway-url", "", "after each pass, push its metrics (the families watchdog run serves) to the Pushgateway at this `URL` (http or https, no credentials)")
	fs.StringVar(&o.Job, "pushgateway-job", "agentenv-scheduler-watchdog", "the job label (`name`) of the pushed group: each run replaces the previous run's metrics in it")
	fs.StringToStringVar(&o.Grouping, "pushgateway-grouping", nil, "more `label=value` pairs of the pushed group's key, e.g. namespace=agentenv-system (the chart sets job and namespace as its PodMonitor does)")
	fs.DurationVar(&o.Timeout, "pushgateway-timeout", 10*time.Second, "deadline of the push")
}

func (o *PushOptions) Validate() error {
	var p problems
	if u, err := url.Parse(o.URL); err == nil && u.User != nil {
		p.addf("--pushgateway-url: credentials in the URL are not supported")
	} else {
		p.url("--pushgateway-url", o.URL, postURL)
	}
	if o.Job == "" {
		p.addf("--pushgateway-job must not be empty")
	}
	for k, v := range o.Grouping {
		if !model.LegacyValidation.IsValidLabelName(k) || k == "job" || v == "" {
			p.addf("--pushgateway-grouping %s=%q: want a label name other than job, and a value", k, v)
		}
	}
	p.positive("--pushgateway-timeout", o.Timeout)
	return p.err()
}

// push sends the run's metrics (unless skip: a dry or skipped run); running totals live
// under statestore.MetricsKey.
func (o *PushOptions) push(ctx context.Context, rep *check.Report, runErr error, took time.Duration, sinks []string, skip bool,
	store *statestore.Store,
) error {
	if o.URL == "" || skip {
		return nil
	}
	m := metrics.New(metrics.Options{Sinks: sinks})
	m.Observe(rep, runErr, took, time.Now())
	return m.Push(ctx, metrics.PushConfig{URL: o.URL, Job: o.Job, Grouping: o.Grouping, Timeout: o.Timeout,
		Totals: func(ctx context.Context, f func(string) (string, error)) error {
			return store.UpdateKey(ctx, statestore.MetricsKey, f)
		}})
}
