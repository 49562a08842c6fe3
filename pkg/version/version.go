// Package version holds build information, injected with -ldflags -X.
package version

import (
	"fmt"
	"runtime"
)

// Set at build time: -X github.com/agentenv/watchdog/pkg/version.Version=v1.2.3 etc.
var (
	Version = "dev"
	Commit  = "unknown"
	Date    = "unknown"
)

// String is the one-line form `watchdog version` prints.
func String() string {
	return fmt.Sprintf("watchdog %s (commit %s, built %s, %s %s/%s)", Version, Commit, Date, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
