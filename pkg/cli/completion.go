package cli

import "github.com/spf13/cobra"

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
	for _, c := range cmd.Commands() {
		addCompletions(c)
	}
}
