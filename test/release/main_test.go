//go:build release

// Package release checks a release as `make release-check` builds it: the image
// layout, the SBOMs, the archives and the chart in RELEASE_DIST, and then the whole
// path a user takes: `make push` to private OCI registries on loopback, the chart
// installed from oci:// onto a real API server with the image pinned to the
// pushed digest. Built only with -tags release: the artifacts come from make.
package release

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/agentenv/watchdog/internal/testenv"
)

var (
	dist, version, commit, helmBin, releaseBin, root string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	for name, into := range map[string]*string{"RELEASE_DIST": &dist, "RELEASE_VERSION": &version, "RELEASE_COMMIT": &commit, "HELM": &helmBin} {
		if *into = os.Getenv(name); *into == "" {
			fmt.Fprintf(os.Stderr, "%s is not set: run these tests with `make release-check`\n", name)
			return 1
		}
	}
	var err error
	if root, err = testenv.RepoRoot(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	tmp, err := os.MkdirTemp("", "watchdog-release-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	// The private registries: `release registry`, the one the real node pulls from.
	releaseBin = filepath.Join(tmp, "release")
	build := exec.Command("go", "build", "-o", releaseBin, "./hack/release")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build hack/release: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

var must = testenv.Must
