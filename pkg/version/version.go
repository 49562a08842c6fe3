// Package version holds build information: set with -ldflags -X (Makefile,
// Dockerfile), else read from the Go build info (`go install`, `go build`).
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set at build time (-X .../pkg/version.Version=v1.2.3), else from the build info.
var (
	Version = "dev"
	Commit  = "unknown"
	Date    = "unknown"
)

func init() {
	if info, ok := debug.ReadBuildInfo(); ok {
		Version, Commit, Date = fromBuildInfo(info, Version, Commit, Date)
	}
}

// fromBuildInfo fills what -ldflags left "dev"/"unknown" from the build info: the module version
// (`go install ...@vX`; a pseudo-version names its commit and time itself), and the VCS revision
// and time (`go build` in a checkout).
func fromBuildInfo(info *debug.BuildInfo, version, commit, date string) (string, string, string) {
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if mv := info.Main.Version; version == "dev" && mv != "" && mv != "(devel)" {
		version = mv
	}
	if rev := settings["vcs.revision"]; commit == "unknown" && rev != "" {
		commit = rev[:min(len(rev), 12)]
		if settings["vcs.modified"] == "true" {
			commit += "-dirty"
		}
	}
	if t := settings["vcs.time"]; date == "unknown" && t != "" {
		date = t
	}
	return version, commit, date
}

// Info is the build information, for `watchdog version -o json`.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	Date      string `json:"date"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Get returns the build information.
func Get() Info {
	return Info{Version: Version, Commit: Commit, Date: Date, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
}

// String is the one-line form `watchdog version` prints.
func String() string {
	return fmt.Sprintf("watchdog %s (commit %s, built %s, %s %s/%s)", Version, Commit, Date, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
