package version

import (
	"runtime"
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
