package cli

import (
	"maps"
	"slices"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
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
	kubeconfigNames := map[string]func(*clientcmdapi.Config) []string{"context": kubeContexts, "namespace": kubeNamespaces}
	for name, complete := range kubeconfigNames {
		if fs.Lookup(name) != nil {
			_ = cmd.RegisterFlagCompletionFunc(name, func(*cobra.Command, []string, string) (
				[]string, cobra.ShellCompDirective,
			) {
				cfg, err := clientcmd.NewDefaultClientConfigLoadingRules().Load()
				if err != nil {
					cfg = clientcmdapi.NewConfig()
				}
				return complete(cfg), cobra.ShellCompDirectiveNoFileComp
			})
		}
	}
	for _, c := range cmd.Commands() {
		addCompletions(c)
	}
}

func kubeContexts(cfg *clientcmdapi.Config) []string { return slices.Sorted(maps.Keys(cfg.Contexts)) }

// kubeNamespaces offers AgentENV's and the kubeconfig's namespaces: no API call.
func kubeNamespaces(cfg *clientcmdapi.Config) []string {
	names := []string{"agentenv-system"}
	for _, c := range cfg.Contexts {
		if c.Namespace != "" {
			names = append(names, c.Namespace)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}
