// Command watchdog keeps the AgentENV scheduler honest: see `watchdog --help`.
package main

import (
	"os"

	"github.com/agentenv/watchdog/pkg/cli"
)

func main() {
	os.Exit(cli.Execute(os.Args[1:], os.Stdout, os.Stderr))
}
