package version

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// The line `watchdog --version` prints names what a bug report needs: the version,
// the commit, the build date and the Go that built it.
func TestStringNamesEveryPart(t *testing.T) {
	old := [3]string{Version, Commit, Date}
	defer func() { Version, Commit, Date = old[0], old[1], old[2] }()
	Version, Commit, Date = "v0.1.0", "abc1234", "2026-12-01T00:00:00Z"
	s := String()
	for _, want := range []string{"v0.1.0", "abc1234", "2026-12-01T00:00:00Z", runtime.Version(), runtime.GOOS + "/" + runtime.GOARCH} {
		if !strings.Contains(s, want) {
			t.Errorf("version.String() = %q lacks %q", s, want)
		}
	}
}

// Without -ldflags, the version, commit and date come from the build info, as
// each way of building leaves it.
func TestFromBuildInfo(t *testing.T) {
	for name, c := range map[string]struct {
		info                      debug.BuildInfo
		version, commit, date     string
		ldVersion, ldCommit, ldAt string
	}{
		"go install @v1.2.3 (module zip: no VCS)": {
			info:    debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}},
			version: "v1.2.3", commit: "unknown", date: "unknown",
		},
		"go install @main (the pseudo-version names commit and time)": {
			info:    debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261201101500-abcdef123456"}},
			version: "v0.0.0-20261201101500-abcdef123456", commit: "unknown", date: "unknown",
		},
		"go build in a dirty checkout": {
			info: debug.BuildInfo{Main: debug.Module{Version: "v0.1.1-0.20261201101500-abcdef123456+dirty"}, Settings: []debug.BuildSetting{
				{Key: "vcs.revision", Value: "abcdef1234567890abcdef1234567890abcdef12"}, {Key: "vcs.time", Value: "2026-12-01T10:15:00Z"}, {Key: "vcs.modified", Value: "true"}}},
			version: "v0.1.1-0.20261201101500-abcdef123456+dirty", commit: "abcdef123456-dirty", date: "2026-12-01T10:15:00Z",
		},
		"go build without VCS stamping": {
			info:    debug.BuildInfo{Main: debug.Module{Version: "(devel)"}},
			version: "dev", commit: "unknown", date: "unknown",
		},
		"-ldflags win": {
			info:      debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "ffff"}}},
			ldVersion: "v9.9.9", ldCommit: "abc1234", ldAt: "2026-11-30T00:00:00Z",
			version: "v9.9.9", commit: "abc1234", date: "2026-11-30T00:00:00Z",
		},
	} {
		v, cm, d := firstOr(c.ldVersion, "dev"), firstOr(c.ldCommit, "unknown"), firstOr(c.ldAt, "unknown")
		v, cm, d = fromBuildInfo(&c.info, v, cm, d)
		if v != c.version || cm != c.commit || d != c.date {
			t.Errorf("%s: %s %s %s, want %s %s %s", name, v, cm, d, c.version, c.commit, c.date)
		}
	}
}

func firstOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
