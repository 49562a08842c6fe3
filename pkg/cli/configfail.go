package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/agentenv/watchdog/pkg/check"
)

// reportConfigFailure pings <heartbeat-url>/fail on a bad configuration (exit 2) of
// check or run, so the dead man's switch notices at the first run rather than
// after its grace period. The configuration may not have parsed at all, so the few
// settings needed are read again, leniently. A dry run or --validate-only sends
// nothing.
func reportConfigFailure(ctx context.Context, cmd *cobra.Command, args []string, cause error, stderr io.Writer) {
	if cmd == nil || (cmd.Name() != "check" && cmd.Name() != "run") || cmd.Parent() == nil || cmd.Parent().Parent() != nil {
		return
	}
	s := lenientSettings(args)
	if truthy(s["dry-run"]) || truthy(s[validateOnlyFlag]) || s["help"] != "" {
		return
	}
	hb := s["heartbeat-url"]
	if hb == "" {
		return
	}
	if err := checkURL(hb); err != nil {
		fmt.Fprintf(stderr, "watchdog: cannot tell the dead man's switch about the configuration error: --heartbeat-url: %v\n", err)
		return
	}
	timeout := 10 * time.Second
	if d, err := time.ParseDuration(s["alert-timeout"]); err == nil && d > 0 {
		timeout = d
	}
	o := &AlertOptions{HeartbeatURL: hb, AlertTimeout: timeout}
	log := zerolog.New(stderr).With().Timestamp().Logger()
	pingHeartbeat(ctx, o, &check.Error{Step: check.StepConfigure, Err: cause}, false, log)
	fmt.Fprintln(stderr, "watchdog: the configuration error was reported to the dead man's switch (<heartbeat-url>/fail)")
}

// lenientSettings reads the settings reportConfigFailure needs from args, ignoring
// other flags and parse errors, then from WATCHDOG_*.
func lenientSettings(args []string) map[string]string {
	names := []string{"heartbeat-url", "alert-timeout", "dry-run", validateOnlyFlag, "help"}
	fs := pflag.NewFlagSet("lenient", pflag.ContinueOnError)
	fs.ParseErrorsAllowlist.UnknownFlags = true
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	values := map[string]*string{}
	for _, n := range names {
		values[n] = new(string)
		fs.StringVar(values[n], n, "", "")
	}
	// Boolean flags may be given without a value: --dry-run means true.
	for _, n := range []string{"dry-run", validateOnlyFlag, "help"} {
		fs.Lookup(n).NoOptDefVal = "true"
	}
	fs.Lookup("help").Shorthand = "h"
	_ = fs.Parse(args)
	out := map[string]string{}
	for _, n := range names {
		if fs.Changed(n) {
			out[n] = *values[n]
		} else if v, ok := os.LookupEnv(EnvName(n)); ok && n != "help" {
			out[n] = v
		}
	}
	return out
}

func truthy(s string) bool {
	b, err := strconv.ParseBool(s)
	return err == nil && b
}
