package cli

import (
	"slices"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
)

// flagValues are the fixed values of the flags that take one of a few words, for
// shell completion (watchdog completion bash|zsh|fish).
var flagValues = map[string][]string{
	"output":          {"text", "json", "yaml"},
	"log-format":      {LogFormatAuto, "json", LogFormatConsole},
	"log-level":       {"debug", "info", "warn", "error"},
	"restart-method":  {"delete", "rollout"},
	"judge-pods":      {"deployment", "selector"},
	"scrape-via":      {"auto", "direct", "apiserver"},
	"discovery-probe": {"off", "list", "canary"},
}

// addCompletions registers value completion on every command's flags: the words
// above, the kubeconfig's contexts, and the namespaces the API server lists.
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
			var names []string
			for n := range cfg.Contexts {
				names = append(names, n)
			}
			slices.Sort(names)
			return names, cobra.ShellCompDirectiveNoFileComp
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

// completeNamespaces offers AgentENV's namespace and those the kubeconfig's contexts
// name: no API call, so completing never waits on a cluster.
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
