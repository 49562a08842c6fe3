// Package cli is the watchdog's command line: cobra commands over one options
// struct per concern, each flag also read from WATCHDOG_<FLAG>.
package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/agentenv/watchdog/pkg/httpbound"
	"github.com/agentenv/watchdog/pkg/kube"
	"github.com/agentenv/watchdog/pkg/version"
)

// Exit codes (docs/design.md §4).
const (
	ExitOK     = 0 // the run completed, whatever it found
	ExitFailed = 1 // the watchdog could not do its job
	ExitUsage  = 2 // bad usage or configuration
)

// UsageError is bad usage or configuration (exit 2): every problem found, one a line.
type UsageError struct{ problems []string }

func (e *UsageError) Error() string { return strings.Join(e.problems, "\n") }

func usagef(format string, args ...any) error {
	return &UsageError{problems: []string{fmt.Sprintf(format, args...)}}
}

// problems collects a command line's usage problems: one run reports all of them.
type problems []string

func (p *problems) addf(format string, args ...any) {
	*p = append(*p, fmt.Sprintf(format, args...))
}

// add appends the problems of Validate results (nil: none).
func (p *problems) add(errs ...error) {
	for _, err := range errs {
		var ue *UsageError
		if errors.As(err, &ue) {
			*p = append(*p, ue.problems...)
		} else if err != nil {
			*p = append(*p, err.Error())
		}
	}
}

// positive reports a duration flag that is not positive; it returns whether d is.
func (p *problems) positive(flag string, d time.Duration) bool {
	if d <= 0 {
		p.addf("%s must be positive, got %s", flag, d)
		return false
	}
	return true
}

func (p *problems) notNegative(flag string, d time.Duration) {
	if d < 0 {
		p.addf("%s must not be negative, got %s", flag, d)
	}
}

func (p *problems) port(flag string, port int) {
	if port < 1 || port > 65535 {
		p.addf("%s %d: want 1-65535", flag, port)
	}
}

// name reports a flag whose value is not the kind of Kubernetes name valid says.
func (p *problems) name(flag, value string, valid func(string) []string) {
	if errs := valid(value); len(errs) > 0 {
		p.addf("%s %q: %s", flag, value, strings.Join(errs, "; "))
	}
}

// oneOf reports a flag whose value is not one of its words (flagValues).
func (p *problems) oneOf(flag, value string) {
	if words := flagValues[flag[2:]]; !slices.Contains(words, value) {
		p.addf("%s %q: want %s or %s", flag, value, strings.Join(words[:len(words)-1], ", "), words[len(words)-1])
	}
}

// key reports an HMAC key shorter than MinOutboxKeyBytes, by its length only.
func (p *problems) key(flag, key string) {
	if n := len(key); n > 0 && n < MinOutboxKeyBytes {
		p.addf("%s has %d bytes: at least %d bytes are required, random (head -c 32 /dev/urandom | base64)", flag, n, MinOutboxKeyBytes)
	}
}

// URL kinds: what a URL flag accepts beyond an http or https URL with a host. A link
// is only shown to people: plain http (a wiki.internal runbook) is fine, and refusing
// it would exit 2, which alerts no one.
const (
	linkURL   = iota
	postURL   // may carry credentials of its own
	secretURL // a credential itself (whoever has it can post to it), or is sent some
)

// url reports the problem of a URL flag, when set; see checkURL.
func (p *problems) url(flag, raw string, kind int) {
	if _, err := checkURL(raw, kind); raw != "" && err != nil {
		p.addf("%s: %v", flag, err)
	}
}

// checkURL parses a URL of a kind. Its error never quotes the URL (url.Parse's does):
// it may be a secret or carry a password. Credentials (a secretURL, or the URL's
// own) cross plain http only to a loopback address (kubectl port-forward, a sidecar).
func checkURL(raw string, kind int) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, fmt.Errorf("not a valid URL: %v", errors.Unwrap(err))
	case u.Host == "":
		return nil, errors.New("URL has no host")
	case u.Scheme != "https" && u.Scheme != "http":
		return nil, fmt.Errorf("scheme %q: want https or http", u.Scheme)
	case kind != linkURL && clearText(u, kind == secretURL):
		return nil, errors.New("plain http is accepted only for loopback addresses; use https: " +
			"credentials over plain http would cross the network in clear text")
	}
	return u, nil
}

// clearText: plain http beyond loopback would carry credentials (creds, or the URL's own).
func clearText(u *url.URL, creds bool) bool {
	if (!creds && u.User == nil) || u.Scheme != "http" || u.Hostname() == "localhost" {
		return false
	}
	ip := net.ParseIP(u.Hostname())
	return ip == nil || !ip.IsLoopback()
}

func (p problems) err() error {
	if len(p) == 0 {
		return nil
	}
	return &UsageError{problems: p}
}

// EnvPrefix prefixes the environment variable of every flag.
const EnvPrefix = "WATCHDOG_"

// EnvName is the environment variable read for a flag: --wedged-for → WATCHDOG_WEDGED_FOR.
func EnvName(flag string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// Execute runs the command line and returns the process exit code.
func Execute(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return ExecuteContext(ctx, args, stdout, stderr)
}

// ExecuteContext is Execute with a caller's context (tests).
func ExecuteContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := NewRootCommand(stdout, stderr)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	// Errors before a command's run began (unknown commands or flags, bad
	// arguments) are usage errors too.
	if _, isUsage := errors.AsType[*UsageError](err); isUsage || root.Annotations["started"] != "true" {
		var p problems
		p.add(err)
		for _, problem := range p {
			fmt.Fprintf(stderr, "watchdog: %s\n", problem)
		}
		// cobra returns the command it parsed for (the root, if none), never nil.
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		return ExitUsage
	}
	fmt.Fprintf(stderr, "watchdog: %v\n", err)
	return ExitFailed
}

// NewRootCommand builds the command tree.
func NewRootCommand(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "watchdog",
		Short: "Keeps the AgentENV scheduler honest: detects a wedged scheduler and restarts it, safely",
		Long: `watchdog scrapes each AgentENV scheduler pod's metrics, asks the API server how many
nodes discovery should see, remembers in a ConfigMap how long a bad state has lasted,
alerts, and restarts a wedged scheduler: never during startup, never for a pod it cannot
see, never twice for one wedge, never into a restart storm.

Every flag can also be set as an environment variable WATCHDOG_<FLAG> (dashes as
underscores, upper case); a flag beats its environment variable.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Annotations:   map[string]string{},
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnv(cmd.Flags()); err != nil {
				return err
			}
			cmd.Root().Annotations["started"] = "true" // cobra has checked the arguments
			return nil
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetUsageTemplate(usageTemplate)
	// Declared, or cobra adds --version with -v, which kubectl users read as verbosity.
	root.Version = version.String()
	root.SetVersionTemplate("{{.Version}}\n")
	root.Flags().Bool("version", false, "print the version, commit and build date, as the version command does")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		// pflag's error quotes the refused value.
		if bad, ok := errors.AsType[*pflag.InvalidValueError](err); ok && secretFlag(bad.GetFlag()) {
			return usagef("invalid value for --%s: %v", bad.GetFlag().Name, bad.Unwrap())
		}
		return usagef("%v", err)
	})
	root.AddCommand(newCheckCommand(stdout, stderr), newStatusCommand(stdout, stderr), newHistoryCommand(stdout, stderr), newVersionCommand(stdout), newNotifyCommand(stdout, stderr), newRunCommand(stderr), newDoctorCommand(stdout, stderr), newBacktestCommand(stdout, stderr))
	addExitCodes(root)
	addCompletions(root)
	return root
}

// addExitCodes ends the help of every command stating no exit codes with the shared ones.
func addExitCodes(cmd *cobra.Command) {
	if !strings.Contains(cmd.Long, "Exit codes") {
		cmd.Long = strings.TrimSpace(cmp.Or(cmd.Long, cmd.Short+".")) +
			"\n\nExit codes: 0 done; 1 failed (the message says why); 2 bad usage or configuration."
	}
	for _, c := range cmd.Commands() {
		addExitCodes(c)
	}
}

// applyEnv sets each flag not given from its environment variable, never echoing a secret's value.
func applyEnv(fs *pflag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		name := EnvName(f.Name)
		v, ok := os.LookupEnv(name)
		if err != nil || f.Changed || !ok {
			return
		}
		if serr := fs.Set(f.Name, v); serr != nil {
			if secretFlag(f) {
				err = usagef("environment variable %s: invalid value for --%s", name, f.Name)
			} else {
				err = usagef("environment variable %s=%q: %v", name, v, serr)
			}
		}
	})
	return err
}

// secretFlag: a flag whose help says (secret), whose value is never echoed.
func secretFlag(f *pflag.Flag) bool { return strings.Contains(f.Usage, "(secret") }

func newVersionCommand(stdout io.Writer) *cobra.Command {
	var output OutputOptions
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and build date",
		Example: `  watchdog version
  watchdog --version   # the same line
  watchdog version -o json | jq -r .commit`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := output.Validate(); err != nil {
				return err
			}
			return output.print(stdout, version.Get(), func(w io.Writer) error {
				_, err := fmt.Fprintln(w, version.String())
				return err
			})
		},
	}
	output.AddFlags(cmd.Flags())
	return cmd
}

// Durations in the logs carry their unit ("2s", as "took" does), not bare milliseconds.
func init() { zerolog.DurationFieldFormat = zerolog.DurationFormatString }

// newLogger builds the stderr logger, with client-go's lines (klog.go): console for
// people (a terminal, or --log-format console), JSON for log pipelines.
func newLogger(o *ClusterOptions, w io.Writer) zerolog.Logger {
	level, _ := zerolog.ParseLevel(o.LogLevel) // validated
	var out io.Writer = w
	if o.LogFormat == LogFormatConsole || (o.LogFormat == LogFormatAuto && isTerminal(w)) {
		// Colors only on a terminal, never with NO_COLOR (no-color.org).
		out = zerolog.ConsoleWriter{Out: w, TimeFormat: "15:04:05", NoColor: os.Getenv("NO_COLOR") != "" || !isTerminal(w)}
	}
	routeKlog(out, level)
	return zerolog.New(out).Level(level).With().Timestamp().Logger()
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

var errNoKubeconfig = usagef("no kubeconfig: give --kubeconfig, set KUBECONFIG, or write ~/.kube/config (in a pod the ServiceAccount is used)")

// restConfig loads the API server connection: in-cluster unless told otherwise, else kubeconfig.
func restConfig(o *ClusterOptions) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if !o.explicitConfig() && inPod() {
		if cfg, err = rest.InClusterConfig(); err != nil {
			return nil, usagef("in-cluster configuration: %v", err)
		}
		inPodOverrides(cfg, o)
	} else if cfg, err = o.loader().ClientConfig(); clientcmd.IsEmptyConfig(err) {
		if raw, rerr := o.loader().RawConfig(); rerr == nil && len(raw.Contexts) > 0 {
			return nil, usagef("the kubeconfig has no current context: give --context, or kubectl config use-context")
		}
		return nil, errNoKubeconfig
	} else if err != nil {
		return nil, usagef("load kubeconfig: %v", err)
	}
	if err := hostCredentials(cfg); err != nil {
		return nil, err
	}
	cfg.Timeout = cmp.Or(cfg.Timeout, o.APITimeout) // --request-timeout, when given, is kubectl's
	cfg.QPS, cfg.Burst = 20, 40
	cfg.Wrap(httpbound.Headers) // the pod proxy's scrapes too (rest.TransportFor)
	cfg.UserAgent = "agentenv-scheduler-watchdog/" + version.Version
	// Protobuf halves the decode cost of pod and EndpointSlice lists.
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	return cfg, nil
}

// hostCredentials moves a server URL's own credentials (https://user:pass@host) into
// basic auth, as the HTTP client would send them (unless the configuration has its
// own): the host shows in logs and reports. A bare host:port is read as client-go does.
func hostCredentials(cfg *rest.Config) error {
	if !strings.Contains(cfg.Host, "@") {
		return nil
	}
	scheme := "" // of a bare host:port, as client-go reads it
	if !strings.Contains(cfg.Host, "://") {
		scheme = "https://"
	}
	u, err := url.Parse(scheme + cfg.Host)
	switch {
	case err != nil:
		// Not shown: url.Parse's error quotes the URL, and so would client-go's.
		return usagef("the API server's URL (--server or the kubeconfig's) is not valid: %v", errors.Unwrap(err))
	case u.User == nil:
		return nil
	case cfg.Username == "" && cfg.BearerToken == "" && cfg.BearerTokenFile == "":
		cfg.Username = u.User.Username()
		cfg.Password, _ = u.User.Password()
	}
	u.User = nil
	cfg.Host = strings.TrimPrefix(u.String(), scheme)
	return nil
}

// inPodOverrides applies the kubectl flags that mean something in a pod too (--as,
// --token, --request-timeout), which the in-cluster configuration does not read.
func inPodOverrides(cfg *rest.Config, o *ClusterOptions) {
	a := o.Overrides.AuthInfo
	cfg.Impersonate.UserName, cfg.Impersonate.UID, cfg.Impersonate.Groups = a.Impersonate, a.ImpersonateUID, a.ImpersonateGroups
	if a.Token != "" {
		cfg.BearerToken, cfg.BearerTokenFile = a.Token, ""
	}
	d, _ := requestTimeout(o.Overrides.Timeout) // validated
	cfg.Timeout = cmp.Or(d, cfg.Timeout)
}

// requestTimeout reads --request-timeout as kubectl does, refusing what clientcmd
// would wrap: a negative value, or bare seconds past time.Duration's range.
func requestTimeout(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && n > int64(math.MaxInt64/time.Second) {
		return 0, errors.New("too long")
	}
	d, err := clientcmd.ParseTimeout(s)
	if err == nil && d < 0 {
		err = errors.New("negative")
	}
	return d, err
}

// inPod: the kubelet sets KUBERNETES_SERVICE_HOST in every container.
func inPod() bool { return os.Getenv("KUBERNETES_SERVICE_HOST") != "" }

func newClient(o *ClusterOptions) (*kube.Client, *rest.Config, error) {
	cfg, err := restConfig(o)
	if err != nil {
		return nil, nil, err
	}
	client, err := kube.New(cfg)
	if err != nil {
		return nil, nil, usagef("API client for %s: %v", cfg.Host, err)
	}
	return client, cfg, nil
}
