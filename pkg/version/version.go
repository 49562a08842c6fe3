// Package version holds build information: set with -ldflags -X (Makefile,
// Dockerfile), else read from the Go build info (`go install`, `go build`).
package version

import (
	"fmt"
	"regexp"
	"runtime"
	"runtime/debug"
	"time"
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

// pseudoVersion is a Go pseudo-version's tail: its UTC timestamp and the commit's
// 12-hex prefix (v0.0.0-20261201101500-abcdef123456, v1.2.4-0.2026...-abcdef123456).
var pseudoVersion = regexp.MustCompile(`(?:^|[-.])(\d{14})-([0-9a-f]{12})(?:\+dirty)?$`)

// fromBuildInfo fills what -ldflags left "dev"/"unknown" from the build info: the
// module version, the VCS revision and time (`go build` in a checkout), else the
// commit and time a pseudo-version names, else the tag (which names the commit).
func fromBuildInfo(info *debug.BuildInfo, version, commit, date string) (string, string, string) {
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	mv := info.Main.Version
	if version == "dev" && mv != "" && mv != "(devel)" {
		version = mv
	}
	if commit == "unknown" {
		switch rev := settings["vcs.revision"]; {
		case rev != "":
			commit = rev[:min(len(rev), 12)]
			if settings["vcs.modified"] == "true" {
				commit += "-dirty"
			}
		case pseudoVersion.MatchString(mv):
			commit = pseudoVersion.FindStringSubmatch(mv)[2]
		case mv != "" && mv != "(devel)":
			commit = "tag " + mv
		}
	}
	if date == "unknown" {
		if t := settings["vcs.time"]; t != "" {
			date = t
		} else if m := pseudoVersion.FindStringSubmatch(mv); m != nil {
			if t, err := time.Parse("20060102150405", m[1]); err == nil {
				date = t.UTC().Format(time.RFC3339)
			}
		}
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
