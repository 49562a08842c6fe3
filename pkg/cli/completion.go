package cli

import (
	"maps"
	"slices"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
)

// flagValues are the words of the flags that take one, for completion and checks.
var flagValues = map[string][]string{
	"output":          {"text", "json", "yaml"},
	"log-format":      {LogFormatAuto, "json", LogFormatConsole},
	"log-level":       {"debug", "info", "warn", "error"},
	"restart-method":  {"delete", "rollout"},
	"judge-pods":      {"deployment", "selector"},
	"scrape-via":      {"auto", "direct", "apiserver"},
	"discovery-probe": {"off", "list", "canary"},
}

// addCompletions registers value completion on every command's flags.
func addCompletions(cmd *cobra.Command) {
	fs := cmd.Flags()
	for name, values := range flagValues {
		if fs.Lookup(name) != nil {
			_ = cmd.RegisterFlagCompletionFunc(name, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
		}
	}
	if fs.Lookup("context") != nil {
		_ = cmd.RegisterFlagCompletionFunc("context", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			cfg, err := clientcmd.NewDefaultClientConfigLoadingRules().Load()
			if err != nil {
				return nil, cobra.ShellCompDirectiveError
			}
			return slices.Sorted(maps.Keys(cfg.Contexts)), cobra.ShellCompDirectiveNoFileComp
		})
	}
	if fs.Lookup("namespace") != nil {
		_ = cmd.RegisterFlagCompletionFunc("namespace", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return completeNamespaces(), cobra.ShellCompDirectiveNoFileComp
		})
	}
	for _, c := range cmd.Commands() {
		addCompletions(c)
	}
}

// completeNamespaces offers AgentENV's and the kubeconfig's namespaces: no API call.
func completeNamespaces() []string {
	names := []string{"agentenv-system"}
	if cfg, err := clientcmd.NewDefaultClientConfigLoadingRules().Load(); err == nil {
		for _, c := range cfg.Contexts {
			if c.Namespace != "" {
				names = append(names, c.Namespace)
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}
