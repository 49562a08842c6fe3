package cli

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/scrape"
	"github.com/agentenv/watchdog/pkg/state"
)

// ClusterOptions are shared by every command that talks to the API server. The
// connection flags are kubectl's own, bound by clientcmd; cli-runtime links too much
// (docs/performance.md "kubectl's connection flags").
type ClusterOptions struct {
	Kubeconfig     string
	Overrides      clientcmd.ConfigOverrides
	Namespace      string // resolved by Validate
	StateConfigMap string
	Lease          string // held by each non-dry pass (check, run)
	Timeout        time.Duration
	APITimeout     time.Duration
	LogLevel       string
	LogFormat      string
}

// Log formats (--log-format).
const (
	LogFormatAuto    = "auto"
	LogFormatJSON    = "json"
	LogFormatConsole = "console"
)

// Defaults chosen from the scheduler's timings for a */5 CronJob (docs/design.md §1, §5 "Defaults for a */5 CronJob").
const (
	DefaultStartupGrace  = 2 * time.Minute
	DefaultWedgedFor     = 150 * time.Second
	DefaultConfirmWindow = 90 * time.Second
	DefaultTimeout       = 3 * time.Minute
	// DefaultSampleInterval is the pure core's (the scheduler's gauge refresh).
	DefaultSampleInterval = decide.DefaultSampleInterval
)

// kubeFlagUsage shortens kubectl's flag texts to the help's 100 columns.
var kubeFlagUsage = map[string]string{ //nolint:gosec // help texts that name credential flags, not credentials
	"kubeconfig":               "path to a kubeconfig (default: in-cluster, then $KUBECONFIG, ~/.kube/config)",
	"namespace":                "namespace of the scheduler and the state (default: the context's, else " + DefaultNamespace + ")",
	"context":                  "kubeconfig context to use",
	"cluster":                  "kubeconfig cluster to use",
	"user":                     "kubeconfig user to use",
	"server":                   "address and port of the API server",
	"token":                    "bearer token for the API server (secret)",
	"as":                       "user to impersonate (a ServiceAccount: system:serviceaccount:<ns>:<name>)",
	"as-group":                 "group to impersonate; repeat for several",
	"as-uid":                   "UID to impersonate",
	"certificate-authority":    "path to a CA certificate file for the API server",
	"client-certificate":       "path to a client certificate file",
	"client-key":               "path to a client key file",
	"tls-server-name":          "server name to verify the API server's certificate against",
	"insecure-skip-tls-verify": "do not verify the API server's certificate (insecure)",
	"proxy-url":                "proxy URL for requests to the API server",
	"disable-compression":      "do not ask for compressed API server responses",
	"request-timeout":          "timeout of each API server request, as kubectl's (0: --api-timeout)",
	"username":                 "basic auth user for the API server",
	"password":                 "basic auth password for the API server (secret)",
}

// KubeConnectionFlags names kubectl's connection flags but -n (backtest hides them; the chart sets none).
func KubeConnectionFlags() []string {
	return slices.DeleteFunc(slices.Sorted(maps.Keys(kubeFlagUsage)), func(name string) bool { return name == "namespace" })
}

// DefaultNamespace is where the chart installs the scheduler, when neither -n nor the context names one.
const DefaultNamespace = "agentenv-system"

func (o *ClusterOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "")
	clientcmd.BindOverrideFlags(&o.Overrides, fs, clientcmd.RecommendedConfigOverrideFlags(""))
	for name, usage := range kubeFlagUsage {
		if f := fs.Lookup(name); f != nil {
			f.Usage = usage
		}
	}
	fs.StringVar(&o.StateConfigMap, "state-configmap", "agentenv-scheduler-watchdog", "ConfigMap holding the watchdog's state")
	fs.StringVar(&o.Lease, "lease", "agentenv-scheduler-watchdog", "Lease each pass of check and run holds while it observes, decides, acts and persists (one pass at a time; a dry run takes none)")
	fs.DurationVar(&o.Timeout, "timeout", DefaultTimeout, "deadline of the whole command (for check and run: of a pass, which must fit a confirmation, --confirm-window, and end before the CronJob's activeDeadlineSeconds)")
	fs.DurationVar(&o.APITimeout, "api-timeout", 15*time.Second, "timeout of each API server request")
	fs.StringVar(&o.LogLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&o.LogFormat, "log-format", LogFormatAuto, "log format on stderr: console (for people), json (for log pipelines), or auto: console on a terminal, json otherwise")
}

// Validate resolves the namespace and reports every invalid flag.
func (o *ClusterOptions) Validate() error {
	var p problems
	o.Namespace = o.resolveNamespace()
	p.name("--namespace", o.Namespace, validation.IsDNS1123Label)
	p.name("--state-configmap", o.StateConfigMap, validation.IsDNS1123Subdomain)
	p.name("--lease", o.Lease, validation.IsDNS1123Subdomain)
	p.positive("--timeout", o.Timeout)
	p.positive("--api-timeout", o.APITimeout)
	if _, err := requestTimeout(o.Overrides.Timeout); err != nil {
		p.addf("--request-timeout %q: %v", o.Overrides.Timeout, err)
	}
	o.LogLevel = strings.ToLower(o.LogLevel) // zerolog's own parse ignores case
	p.oneOf("--log-level", o.LogLevel)
	p.oneOf("--log-format", o.LogFormat)
	return p.err()
}

// resolveNamespace is -n, else the kubeconfig context's (as kubectl), else
// DefaultNamespace. In a pod the chart sets WATCHDOG_NAMESPACE.
func (o *ClusterOptions) resolveNamespace() string {
	if ns := o.Overrides.Context.Namespace; ns != "" {
		return ns
	}
	raw, err := o.loader().RawConfig()
	if err != nil {
		return DefaultNamespace // the client reports the kubeconfig's problem
	}
	if ctx := raw.Contexts[cmp.Or(o.Overrides.CurrentContext, raw.CurrentContext)]; ctx != nil && ctx.Namespace != "" {
		return ctx.Namespace
	}
	return DefaultNamespace
}

// explicitConfig: a kubeconfig, context or server was named, which beats the in-cluster configuration.
func (o *ClusterOptions) explicitConfig() bool {
	return o.Kubeconfig != "" || o.Overrides.CurrentContext != "" || o.Overrides.ClusterInfo.Server != ""
}

// loader reads the kubeconfig as kubectl does, with the command line's overrides.
func (o *ClusterOptions) loader() clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.Kubeconfig
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &o.Overrides)
}

// CheckOptions configure observing and deciding.
type CheckOptions struct {
	SchedulerSelector  string
	SchedulerContainer string
	Deployment         string
	MetricsPort        int
	MetricsPath        string
	ScrapeTimeout      time.Duration
	MetricsMaxBytes    int64
	ScrapeVia          string
	NodesService       string
	NodesPort          int
	SampleInterval     time.Duration
	DryRun             bool
	Shadow             bool
	decide.Config      // the decision flags; options derives the rest
}

func (o *CheckOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.SchedulerSelector, "scheduler-selector", "app.kubernetes.io/name=agentenv-scheduler", "label selector of the scheduler pods")
	fs.StringVar(&o.SchedulerContainer, "scheduler-container", "scheduler", "name of the scheduler container, whose start is the process's age")
	fs.StringVar(&o.Deployment, "deployment", "agentenv-scheduler", "the scheduler's Deployment: with --judge-pods deployment only its pods are judged; rollout gate, Events, and the rollout restart method")
	fs.IntVar(&o.MetricsPort, "metrics-port", 9101, "scheduler metrics port, scraped on each pod's IP")
	fs.StringVar(&o.MetricsPath, "metrics-path", "/metrics", "scheduler metrics path")
	fs.DurationVar(&o.ScrapeTimeout, "scrape-timeout", scrape.DefaultTimeout, "timeout of one metrics scrape, body included")
	fs.Int64Var(&o.MetricsMaxBytes, "metrics-max-bytes", scrape.DefaultMaxBytes, "largest metrics page read; larger pages make the verdict unknown")
	fs.StringVar(&o.ScrapeVia, "scrape-via", string(scrape.ViaAuto), "how metrics are reached: direct (the pod IP), apiserver (the API server's pod proxy; needs get pods/proxy), or auto: direct inside a pod, apiserver elsewhere")
	fs.StringVar(&o.NodesService, "nodes-service", "agentenv-nodes", "Service whose EndpointSlices list the runtime nodes")
	fs.IntVar(&o.NodesPort, "nodes-port", 8000, "node port that discovery counts")
	fs.DurationVar(&o.StartupGrace, "startup-grace", DefaultStartupGrace, "no verdict but starting this long after the scheduler container started")
	fs.DurationVar(&o.WedgedFor, "wedged-for", DefaultWedgedFor, "restart once a wedge has lasted this long across observations of one process, and held through --confirm-window of the restarting run's samples")
	fs.DurationVar(&o.ConfirmWindow, "confirm-window", DefaultConfirmWindow, "with strong evidence, restart once the wedge held this long while sampling (0 disables; keep it above the 56-71 s an API-server flap takes to heal)")
	fs.DurationVar(&o.SampleInterval, "sample-interval", DefaultSampleInterval, "while confirming, start a sample this often, however long each takes (the scheduler refreshes its gauges every 15 s)")
	fs.IntVar(&o.MaxRestarts, "max-restarts", 3, "restart budget: at most this many restarts per --restart-window (0: never restart, alert only)")
	fs.DurationVar(&o.RestartWindow, "restart-window", time.Hour, "window of the restart budget")
	fs.DurationVar(&o.BackoffBase, "restart-backoff", decide.DefaultBackoffBase, "after a restart that did not heal (the replacement wedged within 15m of its start), wait this long before the next, doubling per further one (0: no back-off)")
	fs.DurationVar(&o.BackoffMax, "restart-backoff-max", decide.DefaultBackoffMax, "longest wait of the restart back-off")
	fs.StringVar(&o.RestartMethod, "restart-method", decide.MethodDelete, "delete (the pod, UID-preconditioned) or rollout (kubectl rollout restart of --deployment)")
	fs.BoolVar(&o.RestartOnDegraded, "restart-on-degraded", false, "also restart a degraded scheduler (stale cache) once it has lasted --wedged-for")
	fs.StringVar(&o.LeaderLease, "leader-lease", "", "Lease naming the leader scheduler; when set, only its holder is judged (HA)")
	fs.StringVar((*string)(&o.JudgePods), "judge-pods", string(decide.JudgeDeployment), "which pods matching --scheduler-selector are judged: deployment (only those whose owner chain, by UID, leads to --deployment; others, a canary say, are listed, not judged) or selector (every one: a scheduler no Deployment runs)")
	fs.DurationVar(&o.MaxWatchAge, "max-watch-age", 0, "when the scheduler exports agentenv_scheduler_watch_last_event_age_seconds, an older watch is strong evidence (0: off)")
	fs.IntVar(&o.MaxPods, "max-pods", 10, "judge nothing (verdict unknown, a warning, no scrape, no restart) when more live pods than this would be judged (--judge-pods: of --deployment, or matching --scheduler-selector)")
	fs.BoolVar(&o.DryRun, "dry-run", false, "run the real pipeline but write, delete, record and send nothing; show what would happen")
	fs.BoolVar(&o.Shadow, "shadow", false, "run as live (state, episodes, alerts) but record a would-restart instead of restarting; leaving it needs a fresh confirmation before a restart")
}

// Validate reports every invalid flag in declaration order; timeout is --timeout.
func (o *CheckOptions) Validate(timeout time.Duration) error {
	var p problems
	if _, err := labels.Parse(o.SchedulerSelector); err != nil || strings.TrimSpace(o.SchedulerSelector) == "" {
		p.addf("--scheduler-selector %q is not a label selector: %v", o.SchedulerSelector, err)
	}
	// A name that cannot be a Deployment's would judge no pod on every run
	// (--judge-pods deployment) and hold every rollout restart.
	p.name("--deployment", o.Deployment, validation.IsDNS1123Subdomain)
	p.port("--metrics-port", o.MetricsPort)
	if !strings.HasPrefix(o.MetricsPath, "/") {
		p.addf("--metrics-path %q must start with /", o.MetricsPath)
	}
	if p.positive("--scrape-timeout", o.ScrapeTimeout) && o.ScrapeTimeout >= timeout {
		p.addf("--scrape-timeout %s must be shorter than --timeout %s", o.ScrapeTimeout, timeout)
	}
	if o.MetricsMaxBytes < 1024 {
		p.addf("--metrics-max-bytes %d is too small for any metrics page", o.MetricsMaxBytes)
	}
	if _, err := scrape.ParseVia(o.ScrapeVia); err != nil {
		p.addf("--scrape-via %v", err)
	}
	p.name("--nodes-service", o.NodesService, validation.IsDNS1123Label)
	p.port("--nodes-port", o.NodesPort)
	p.notNegative("--startup-grace", o.StartupGrace)
	p.positive("--wedged-for", o.WedgedFor)
	p.notNegative("--confirm-window", o.ConfirmWindow)
	p.positive("--sample-interval", o.SampleInterval)
	// The budget counts the state's restart history, which keeps at most
	// state.MaxRestarts records, none older than state.MaxHistoryAge.
	switch {
	case o.MaxRestarts < 0:
		p.addf("--max-restarts must not be negative, got %d", o.MaxRestarts)
	case o.MaxRestarts > state.MaxRestarts:
		p.addf("--max-restarts %d: at most %d (the restart history keeps %d records)", o.MaxRestarts, state.MaxRestarts, state.MaxRestarts)
	}
	if p.positive("--restart-window", o.RestartWindow) && o.RestartWindow > state.MaxHistoryAge {
		p.addf("--restart-window %s: at most %s (older restart records are dropped, so they would not count)", o.RestartWindow, state.MaxHistoryAge)
	}
	p.notNegative("--restart-backoff", o.BackoffBase)
	p.positive("--restart-backoff-max", o.BackoffMax)
	p.oneOf("--restart-method", o.RestartMethod)
	p.oneOf("--judge-pods", string(o.JudgePods))
	p.notNegative("--max-watch-age", o.MaxWatchAge)
	if o.MaxPods < 1 {
		p.addf("--max-pods must be at least 1, got %d", o.MaxPods)
	}
	if o.DryRun && o.Shadow {
		p.addf("--dry-run and --shadow: choose one (a dry run writes and sends nothing; shadow mode keeps its record and restarts nothing)")
	}
	return p.err()
}

// mode is the run's mode (Validate refuses --dry-run with --shadow).
func (o *CheckOptions) mode() state.Mode {
	switch {
	case o.DryRun:
		return state.ModeDryRun
	case o.Shadow:
		return state.ModeShadow
	}
	return state.ModeLive
}

// AlertOptions configure where alerts go. URLs and keys are secrets, never logged.
type AlertOptions struct {
	SlackWebhookURL string
	WebhookURL      string
	WebhookSecret   string
	HeartbeatURL    string
	RunbookURL      string
	ClusterName     string
	RealertInterval time.Duration
	BlindAfter      int
	AlertTimeout    time.Duration
	Alertmanager    AlertmanagerOptions
	Labels          AlertLabels
}

// AlertLabels is --alert-labels: key=value pairs, comma-separated; "" is none.
type AlertLabels map[string]string

// reservedLabels are the watchdog's own Alertmanager labels, which identify an alert.
var reservedLabels = map[string]bool{"alertname": true, "severity": true, "event": true, "namespace": true, "cluster": true, "pod": true, "shadow": true}

func (l *AlertLabels) String() string {
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(*l)) {
		kv = append(kv, k+"="+(*l)[k])
	}
	return strings.Join(kv, ",")
}

func (l *AlertLabels) Type() string { return "key=value,..." }

// Set parses key=value pairs of label names Alertmanager accepts, not reserved ones.
func (l *AlertLabels) Set(text string) error {
	out := AlertLabels{}
	for _, pair := range strings.Split(text, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch {
		case !ok || v == "":
			return fmt.Errorf("%q: want key=value", pair)
		case !model.LegacyValidation.IsValidLabelName(k) || strings.HasPrefix(k, "__"):
			return fmt.Errorf("%q: not a label name (letters, digits and _, not starting with a digit or __)", k)
		case reservedLabels[k]:
			return fmt.Errorf("%q: the watchdog sets this label itself", k)
		case len(v) > 256:
			return fmt.Errorf("%q: the value is longer than 256 characters", k)
		}
		if _, dup := out[k]; dup {
			return fmt.Errorf("%q: given twice", k)
		}
		out[k] = v
	}
	if len(out) == 0 {
		out = nil
	}
	*l = out
	return nil
}

func (o *AlertOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.SlackWebhookURL, "slack-webhook-url", "", "Slack incoming webhook URL (secret)")
	fs.StringVar(&o.WebhookURL, "webhook-url", "", "generic JSON webhook URL (secret)")
	fs.StringVar(&o.WebhookSecret, "webhook-secret", "", "HMAC-SHA256 key (at least 32 random bytes) signing generic webhook requests; without it every run warns that they are unsigned (secret)")
	fs.StringVar(&o.HeartbeatURL, "heartbeat-url", "", "dead man's switch: pinged after every completed run, <url>/fail after a failed one (secret)")
	fs.StringVar(&o.RunbookURL, "runbook-url", "", "runbook linked from alerts")
	fs.StringVar(&o.ClusterName, "cluster-name", "", "cluster name shown in every alert")
	fs.DurationVar(&o.RealertInterval, "realert-interval", time.Hour, "remind about a problem still open this often")
	fs.IntVar(&o.BlindAfter, "blind-after", 3, "alert blind after this many consecutive runs with verdict unknown")
	fs.DurationVar(&o.AlertTimeout, "alert-timeout", 10*time.Second, "timeout of one delivery attempt")
	fs.Var(&o.Labels, "alert-labels", "labels on every alert, comma-separated `name=value` pairs (team=scheduling,tier=1), for routing: Alertmanager labels, the webhook's labels, a line in Slack")
	o.Alertmanager.AddFlags(fs)
}

// MinOutboxKeyBytes is the shortest --outbox-key and --webhook-secret: an HMAC-SHA256
// key of fewer random bytes is weaker than the hash.
const MinOutboxKeyBytes = 32

// Validate reports every invalid flag in declaration order.
func (o *AlertOptions) Validate() error {
	var p problems
	p.url("--slack-webhook-url", o.SlackWebhookURL, secretURL)
	p.url("--webhook-url", o.WebhookURL, secretURL)
	if o.WebhookSecret != "" && o.WebhookURL == "" {
		p.addf("--webhook-secret is set but --webhook-url is not")
	}
	p.key("--webhook-secret", o.WebhookSecret)
	p.url("--heartbeat-url", o.HeartbeatURL, secretURL)
	p.url("--runbook-url", o.RunbookURL, linkURL)
	p.positive("--realert-interval", o.RealertInterval)
	if o.BlindAfter < 1 {
		p.addf("--blind-after must be at least 1, got %d", o.BlindAfter)
	}
	p.positive("--alert-timeout", o.AlertTimeout)
	p.add(o.Alertmanager.Validate())
	return p.err()
}

// OutputOptions choose how results are printed on stdout.
type OutputOptions struct {
	Output string
}

func (o *OutputOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVarP(&o.Output, "output", "o", "text", "text (for people), json (one object, for scripts) or yaml")
}

func (o *OutputOptions) Validate() error {
	var p problems
	p.oneOf("--output", o.Output)
	return p.err()
}

// print writes v for people with text, or as JSON or YAML (-o), with v's own
// WriteJSON when it has one. JSON is one object on one line (which a log pipeline
// keeps whole), or indented on a terminal, where a person reads it; YAML is
// converted from that JSON so that both have the same fields.
func (o *OutputOptions) print(w io.Writer, v any, text func(io.Writer) error) error {
	if o.Output != "json" && o.Output != "yaml" {
		return text(w)
	}
	write := func(w io.Writer) error { return json.NewEncoder(w).Encode(v) }
	if j, ok := v.(interface{ WriteJSON(io.Writer) error }); ok {
		write = j.WriteJSON
	}
	if o.Output != "yaml" && !isTerminal(w) {
		return write(w)
	}
	var b, out bytes.Buffer
	if err := write(&b); err != nil {
		return err
	}
	if o.Output == "yaml" {
		y, err := yaml.JSONToYAML(b.Bytes())
		if err != nil {
			return err
		}
		out.Write(y)
	} else if err := json.Indent(&out, b.Bytes(), "", "  "); err != nil {
		return err
	}
	_, err := w.Write(out.Bytes())
	return err
}
