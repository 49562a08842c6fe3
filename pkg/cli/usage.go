package cli

import (
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// helpColumns is the width every --help line fits in: flag texts are wrapped.
const helpColumns = 100

type flagGroup struct {
	title string
	flags []string
}

// checkFlagGroups orders check's and run's many flags: what most installs set, then
// by concern; a flag in no group comes last, under "Other flags".
var checkFlagGroups = []flagGroup{
	{"Common flags", []string{"namespace", "kubeconfig", "context", "output", "dry-run", "shadow", "deployment",
		"scheduler-selector", "wedged-for", "max-restarts", "restart-method", "cluster-name", "slack-webhook-url",
		"webhook-url", "alertmanager-url", "timeout", "validate-only", "help"}},
	{"Decision flags", []string{"startup-grace", "confirm-window", "sample-interval", "max-watch-age", "restart-on-degraded",
		"restart-window", "restart-backoff", "restart-backoff-max", "judge-pods", "leader-lease", "max-pods",
		"hold-restarts-on-alert"}},
	{"Scheduler flags", []string{"scheduler-container", "metrics-port", "metrics-path", "metrics-max-bytes", "scrape-timeout",
		"scrape-via", "nodes-service", "nodes-port", "state-configmap", "lease", "evidence-configmap", "evidence-logs"}},
	{"Alert flags", []string{"runbook-url", "realert-interval", "blind-after", "alert-timeout", "webhook-secret", "heartbeat-url",
		"outbox-key", "alertmanager-username", "alertmanager-password", "alertmanager-bearer-token",
		"alertmanager-alert-ttl", "alertmanager-generator-url"}},
	{"Pushgateway flags", []string{"pushgateway-url", "pushgateway-job", "pushgateway-grouping", "pushgateway-timeout"}},
	{"Cluster connection flags (as kubectl's)", []string{"cluster", "user", "server", "token", "as", "as-group", "as-uid",
		"request-timeout", "api-timeout", "certificate-authority", "client-certificate", "client-key", "tls-server-name",
		"insecure-skip-tls-verify", "proxy-url", "disable-compression", "username", "password"}},
	{"Logging flags", []string{"log-level", "log-format"}},
}

// groupedFlags renders a command's local flags, wrapped, in its groups' order,
// then the flags of no group.
func groupedFlags(c *cobra.Command) string {
	local, groups := c.LocalFlags(), []flagGroup{{"Flags", nil}}
	if c.Name() == "check" || c.Name() == "run" {
		groups = append(slices.Clip(checkFlagGroups), flagGroup{"Other flags", nil})
	}
	placed := map[string]bool{}
	var sections []string
	for i, g := range groups {
		if i == len(groups)-1 {
			local.VisitAll(func(f *pflag.Flag) {
				if !placed[f.Name] {
					g.flags = append(g.flags, f.Name)
				}
			})
		}
		fs := pflag.NewFlagSet(g.title, pflag.ContinueOnError)
		fs.SortFlags = false
		for _, name := range g.flags {
			if f := local.Lookup(name); f != nil && !f.Hidden {
				fs.AddFlag(f)
			}
			placed[name] = true
		}
		if fs.HasAvailableFlags() {
			sections = append(sections, g.title+":\n"+wrap(fs))
		}
	}
	return strings.Join(sections, "\n\n")
}

// usageTemplate is cobra's, with the flags grouped and wrapped (groupedFlags).
var usageTemplate = strings.NewReplacer(
	"Flags:\n{{.LocalFlags.FlagUsages | trimTrailingWhitespaces}}", "{{groupedFlags .}}",
	"{{.InheritedFlags.FlagUsages | trimTrailingWhitespaces}}", "{{wrappedFlags .InheritedFlags}}",
).Replace((&cobra.Command{}).UsageTemplate())

// wrap is pflag's wrapped usages, with a line still too long (a metric name) broken
// at its last comma or brace inside the width.
func wrap(fs *pflag.FlagSet) string {
	var out []string
	for _, line := range strings.Split(strings.TrimRight(fs.FlagUsagesWrapped(helpColumns), " \n"), "\n") {
		indent := len(line) - len(strings.TrimLeft(line, " "))
		for len([]rune(line)) > helpColumns {
			r := []rune(line)
			cut := strings.LastIndexAny(string(r[:helpColumns]), ",{")
			if cut <= indent {
				break
			}
			out = append(out, string(r[:cut+1]))
			line = strings.Repeat(" ", indent+2) + string(r[cut+1:])
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

func addFlags(cmd *cobra.Command, opts ...interface{ AddFlags(*pflag.FlagSet) }) {
	for _, o := range opts {
		o.AddFlags(cmd.Flags())
	}
}

// hideFlags hides flags a command accepts but does not show; a name it lacks is a bug.
func hideFlags(fs *pflag.FlagSet, names ...string) {
	for _, name := range names {
		if err := fs.MarkHidden(name); err != nil {
			panic(err)
		}
	}
}

func init() {
	cobra.AddTemplateFunc("groupedFlags", groupedFlags)
	cobra.AddTemplateFunc("wrappedFlags", wrap)
}
