// Package cli is the watchdog's command line: cobra commands over one options
// struct per concern, each flag also read from WATCHDOG_<FLAG>.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"os/signal"
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

// UsageError is bad usage or configuration: exit 2. It lists every problem found,
// one a line, in the order the flags are declared.
type UsageError struct{ problems []string }

func (e *UsageError) Error() string { return strings.Join(e.problems, "\n") }

func usagef(format string, args ...any) error {
	return &UsageError{problems: []string{fmt.Sprintf(format, args...)}}
}

// problems collects the usage problems of a command line, so that one run reports
// all of them rather than the first.
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
	var ue *UsageError
	// Errors before a command's run began (unknown commands or flags, bad
	// arguments) are usage errors too.
	if errors.As(err, &ue) || root.Annotations["started"] != "true" {
		problems := []string{err.Error()}
		if ue != nil {
			problems = ue.problems
		}
		for _, problem := range problems {
			fmt.Fprintf(stderr, "watchdog: %s\n", problem)
		}
		// cobra returns the command it parsed for (the root, if none), never nil.
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		reportConfigFailure(ctx, cmd, args, err, stderr)
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
	// --version prints exactly what `watchdog version` prints. Declared here so cobra
	// does not add its own with a -v shorthand (kubectl users read -v as verbosity).
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

// addExitCodes ends the help of every command that does not state its own exit
// codes with the ones every command shares (ExitOK, ExitFailed, ExitUsage).
func addExitCodes(cmd *cobra.Command) {
	if !strings.Contains(cmd.Long, "Exit codes") {
		long := cmd.Long
		if long == "" {
			long = cmd.Short + "."
		}
		cmd.Long = strings.TrimSpace(long) + "\n\nExit codes: 0 done; 1 failed (the message says why); 2 bad usage or configuration."
	}
	for _, c := range cmd.Commands() {
		addExitCodes(c)
	}
}

// applyEnv sets every flag not given on the command line from its environment
// variable. Values of flags whose help says (secret) are never echoed in errors.
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

// newLogger builds the stderr logger: console for people (a terminal, or
// --log-format console), JSON for log pipelines. client-go's own lines (klog) go
// through it too (klog.go).
func newLogger(o *ClusterOptions, w io.Writer) zerolog.Logger {
	level, _ := zerolog.ParseLevel(o.LogLevel) // validated
	var out io.Writer = w
	if o.LogFormat == LogFormatConsole || (o.LogFormat == LogFormatAuto && isTerminal(w)) {
		// Colors only on a terminal, never with NO_COLOR (no-color.org).
		out = zerolog.ConsoleWriter{Out: w, TimeFormat: "15:04:05", NoColor: os.Getenv("NO_COLOR") != "" || !isTerminal(w)}
	}
	log := zerolog.New(out).Level(level).With().Timestamp().Logger()
	routeKlog(log)
	return log
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// restConfig loads the API server connection: in-cluster when nothing says
// otherwise, then the usual kubeconfig rules.
func restConfig(o *ClusterOptions) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if !o.explicitConfig() && inPod() {
		if cfg, err = rest.InClusterConfig(); err != nil {
			return nil, usagef("in-cluster configuration: %v", err)
		}
		if err := inPodOverrides(cfg, o); err != nil {
			return nil, err
		}
	} else if cfg, err = o.loader().ClientConfig(); clientcmd.IsEmptyConfig(err) {
		return nil, usagef("no kubeconfig: give --kubeconfig, set KUBECONFIG, or write ~/.kube/config (in a pod the ServiceAccount is used)")
	} else if err != nil {
		return nil, usagef("load kubeconfig: %v", err)
	}
	if err := hostCredentials(cfg); err != nil {
		return nil, err
	}
	// --request-timeout, when given, is kubectl's; otherwise --api-timeout.
	if rt := o.Overrides.Timeout; rt == "" || rt == "0" {
		cfg.Timeout = o.APITimeout
	}
	cfg.QPS, cfg.Burst = 20, 40
	cfg.Wrap(httpbound.Headers) // the pod proxy's scrapes too (rest.TransportFor)
	cfg.UserAgent = "agentenv-scheduler-watchdog/" + version.Version
	// Protobuf halves the decode cost of pod and EndpointSlice lists.
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	return cfg, nil
}

// hostCredentials moves a server URL's own credentials (https://user:pass@host) into
// the basic auth the HTTP client sent from the URL (unless the configuration has
// its own): the host shows in logs, errors and reports, and builds the pod proxy's
// scrape URL. It reads the host as client-go does, a bare host:port with no scheme.
func hostCredentials(cfg *rest.Config) error {
	if !strings.Contains(cfg.Host, "@") {
		return nil
	}
	bare := !strings.Contains(cfg.Host, "://")
	u, err := url.Parse(cfg.Host)
	if bare {
		u, err = url.Parse("https://" + cfg.Host)
	}
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
	cfg.Host = u.String()
	if bare {
		cfg.Host = strings.TrimPrefix(cfg.Host, "https://")
	}
	return nil
}

// inPodOverrides applies the kubectl flags that mean something in a pod too
// (--as for a check of rights, --token, --request-timeout), which the
// in-cluster configuration, unlike a kubeconfig's, does not read.
func inPodOverrides(cfg *rest.Config, o *ClusterOptions) error {
	a := o.Overrides.AuthInfo
	cfg.Impersonate.UserName, cfg.Impersonate.UID, cfg.Impersonate.Groups = a.Impersonate, a.ImpersonateUID, a.ImpersonateGroups
	if a.Token != "" {
		cfg.BearerToken, cfg.BearerTokenFile = a.Token, ""
	}
	if rt := o.Overrides.Timeout; rt != "" && rt != "0" {
		d, err := requestTimeout(rt)
		if err != nil {
			return usagef("--request-timeout %q: %v", rt, err)
		}
		cfg.Timeout = d
	}
	return nil
}

// requestTimeout reads --request-timeout as kubectl does (a duration, or bare
// seconds), refusing what clientcmd would wrap: a negative value or bare seconds
// past time.Duration's range.
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

// inPod: the watchdog runs in a pod (the kubelet sets KUBERNETES_SERVICE_HOST in
// every container), where pod IPs are routable.
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
