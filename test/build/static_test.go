// Package build proves the release binary: built with the Dockerfile's flags it
// is static (it must run on distroless/static) and runs with an empty environment.
package build

import (
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentenv/watchdog/internal/testenv"
)

// dockerBuild reads the `go build` RUN line of the Dockerfile, so that the test
// follows the Dockerfile rather than a copy of its flags.
func dockerBuild(t *testing.T, root string) (env []string, args []string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`(?m)^RUN (.*go build .*)$`).FindStringSubmatch(string(b))
	if line == nil {
		t.Fatal("no `RUN ... go build` line in the Dockerfile")
	}
	run := strings.ReplaceAll(line[1], "${VERSION}", "v9.9.9-test")
	run = strings.ReplaceAll(run, "${COMMIT}", "abc1234")
	run = strings.ReplaceAll(run, "${DATE}", "2026-11-30T00:00:00Z")
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "-ldflags"} {
		if !strings.Contains(run, want) {
			t.Fatalf("the Dockerfile build lacks %s: %s", want, run)
		}
	}
	// CGO_ENABLED=0 GOOS=linux go build <args...>
	envPart, cmdPart, _ := strings.Cut(run, "go build ")
	env = append(strings.Fields(envPart), "GOTOOLCHAIN="+dockerToolchain(t, string(b)))
	ldflags := regexp.MustCompile(`-ldflags "([^"]*)"`).FindStringSubmatch(cmdPart)
	if ldflags == nil {
		t.Fatalf("cannot read -ldflags from %s", cmdPart)
	}
	rest := strings.Replace(cmdPart, ldflags[0], "", 1)
	args = append([]string{"build", "-ldflags", ldflags[1]}, strings.Fields(rest)...)
	return env, args
}

// dockerToolchain is the GOTOOLCHAIN the Dockerfile's build stage sets, which must
// be the Makefile's: the image's own Go is not what ships.
func dockerToolchain(t *testing.T, dockerfile string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^ENV GOTOOLCHAIN=(\S+)$`).FindStringSubmatch(dockerfile)
	if m == nil {
		t.Fatal("the Dockerfile's build stage sets no GOTOOLCHAIN: it would build with the image's Go")
	}
	if want := releaseToolchain(t); m[1] != want {
		t.Fatalf("the Dockerfile builds with GOTOOLCHAIN=%s, the Makefile with %s", m[1], want)
	}
	return m[1]
}

// releaseToolchain is the Makefile's GOTOOLCHAIN, the one Go every build uses.
func releaseToolchain(t *testing.T) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^export GOTOOLCHAIN := (go\d+\.\d+\.\d+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("no `export GOTOOLCHAIN := goX.Y.Z` in the Makefile")
	}
	return string(m[1])
}

// dockerfileFroms are the Dockerfile's FROM lines, each as the line and its image.
func dockerfileFroms(t *testing.T) [][]string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	return regexp.MustCompile(`(?m)^FROM\s+(\S+)`).FindAllStringSubmatch(string(b), -1)
}

// TestBaseImagesArePinnedByDigest: every FROM names its image by tag and digest,
// so a moved tag cannot change what is built.
func TestBaseImagesArePinnedByDigest(t *testing.T) {
	froms := dockerfileFroms(t)
	if len(froms) < 2 {
		t.Fatalf("want a build and a runtime stage, found %d FROM lines", len(froms))
	}
	pinned := regexp.MustCompile(`^[a-z0-9./-]+:[\w.-]+@sha256:[0-9a-f]{64}$`)
	for _, f := range froms {
		if !pinned.MatchString(f[1]) {
			t.Errorf("FROM %s is not pinned as image:tag@sha256:<64 hex digits>", f[1])
		}
	}
	if !strings.Contains(froms[len(froms)-1][1], "distroless/static") {
		t.Errorf("the runtime image is %s, not distroless/static", froms[len(froms)-1][1])
	}
}

// TestMakePushBuildsOnTheReleaseBase: `make push` (which the release runs) builds on
// the Dockerfile's runtime base, pinned by digest; make image keeps the offline local
// base, and IMAGE_BASE=local chooses it for a push (hack/push.sh then warns, first
// and in what it prints last: test/release).
func TestMakePushBuildsOnTheReleaseBase(t *testing.T) {
	froms := dockerfileFroms(t)
	release := froms[len(froms)-1][1]
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"push", "REGISTRY=reg.example/team"}, release},
		{[]string{"push", "dist", "manifests", "REGISTRY=ghcr.io/agentenv", "VERSION=v1.2.3"}, release}, // release.yml's
		{[]string{"push", "REGISTRY=reg.example/team", "IMAGE_BASE=local"}, "local"},
		{[]string{"image"}, "local"},
	} {
		cmd := exec.Command("make", append([]string{"-n"}, c.args...)...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make -n %v: %v\n%s", c.args, err, out)
		}
		if got := regexp.MustCompile(`IMAGE_BASE=(\S+)`).FindAllStringSubmatch(string(out), -1); len(got) == 0 || got[0][1] != c.want {
			t.Errorf("make %v builds on %v, want IMAGE_BASE=%s", c.args, got, c.want)
		}
	}
}

// TestReleaseGoCheck: hack/check-release-go.sh (a `make lint` step) accepts a
// binary whose `watchdog version` names the release Go and refuses any other.
func TestReleaseGoCheck(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	fake := func(name, goVersion string) string {
		p := filepath.Join(dir, name)
		script := "#!/bin/sh\necho 'watchdog v1.0.0 (commit abc1234, built 2026-11-30T00:00:00Z, " + goVersion + " linux/amd64)'\n"
		if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	want := releaseToolchain(t)
	check := func(bin string) (string, error) {
		out, err := exec.Command(filepath.Join(root, "hack/check-release-go.sh"), bin, want).CombinedOutput()
		return string(out), err
	}
	if out, err := check(fake("release", want)); err != nil {
		t.Errorf("a binary built with %s refused: %v\n%s", want, err, out)
	}
	for _, other := range []string{"go1.26.8", want + "rc1", "devel"} {
		if out, err := check(fake("other", other)); err == nil || !strings.Contains(out, "not the release toolchain") && !strings.Contains(out, "cannot read") {
			t.Errorf("a binary built with %s accepted: %v\n%s", other, err, out)
		}
	}
}

// TestVulnDBAge: hack/vulndb-age.sh (a `make lint` step) prints the pinned
// database's age and fails past VULNDB_MAX_AGE_DAYS (default 90).
func TestVulnDBAge(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	const version = "v0.0.0-20261105234957-e22db6528018"
	for _, tc := range []struct {
		now, max string
		fail     bool
		says     string
	}{
		{"2026-12-01T00:00:00Z", "", false, "25 days old (limit 90"},
		{"2027-02-03T23:49:57Z", "", false, "90 days old"},
		{"2027-02-04T23:49:57Z", "", true, "91 days old, over the 90-day limit: refresh it with 'make vulndb-refresh'"},
		{"2027-06-01T00:00:00Z", "365", false, "207 days old (limit 365"},
	} {
		cmd := exec.Command(filepath.Join(root, "hack/vulndb-age.sh"))
		cmd.Env = append(os.Environ(), "VULNDB_VERSION="+version, "VULNDB_NOW="+tc.now)
		if tc.max != "" {
			cmd.Env = append(cmd.Env, "VULNDB_MAX_AGE_DAYS="+tc.max)
		}
		out, err := cmd.CombinedOutput()
		if (err != nil) != tc.fail || !strings.Contains(string(out), tc.says) {
			t.Errorf("at %s (max %q): err %v, want failure %v saying %q:\n%s", tc.now, tc.max, err, tc.fail, tc.says, out)
		}
	}
	// The pinned version is one the script can date.
	out, err := exec.Command(filepath.Join(root, "hack/lint-tools.sh"), "--vulndb-version").Output()
	if err != nil || !regexp.MustCompile(`^v0\.0\.0-\d{14}-[0-9a-f]{12}\n$`).Match(out) {
		t.Errorf("hack/lint-tools.sh --vulndb-version: %q, %v", out, err)
	}
}

func TestBinaryIsStaticAndRunsWithEmptyEnvironment(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	env, args := dockerBuild(t, root)
	out := filepath.Join(t.TempDir(), "watchdog")
	for i, a := range args {
		if a == "/out/watchdog" {
			args[i] = out
		}
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %v: %v\n%s", args, err, b)
	}

	f, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary asks for a dynamic loader (PT_INTERP): not static")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary links shared libraries: %v", libs)
	}
	if f.Section(".symtab") != nil {
		t.Error("the binary is not stripped (-s -w)")
	}
	info, _ := os.Stat(out)
	t.Logf("static binary: %.1f MB", float64(info.Size())/(1<<20))

	run := exec.Command(out, "version")
	run.Env = []string{} // nothing: no HOME, no PATH, no KUBECONFIG
	got, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("version with an empty environment: %v\n%s", err, got)
	}
	for _, want := range []string{"v9.9.9-test", "abc1234", "2026-11-30T00:00:00Z", ", " + releaseToolchain(t) + " "} {
		if !strings.Contains(string(got), want) {
			t.Errorf("version output %q lacks the injected %s", got, want)
		}
	}
	// With no configuration at all it must fail cleanly as a usage error, not crash.
	check := exec.Command(out, "check")
	check.Env = []string{}
	msg, err := check.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Errorf("check with no kubeconfig: want exit 2, got %v\n%s", err, msg)
	}
}

// TestPlainGoBuildPrintsTheCommit: `go build` in a fresh clone, without the
// Makefile's -ldflags, prints the clone's commit and a version from the build
// info, not "dev (commit unknown)". A clone, not this directory: Go stamps the
// VCS only where .git is a directory, which a git worktree's is not.
func TestPlainGoBuildPrintsTheCommit(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	clone := filepath.Join(t.TempDir(), "watchdog")
	if b, err := exec.Command("git", "clone", "--quiet", "--local", "--no-hardlinks", root, clone).CombinedOutput(); err != nil {
		t.Skipf("not a git checkout: %v\n%s", err, b)
	}
	head, err := exec.Command("git", "-C", clone, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "watchdog")
	build := exec.Command("go", "build", "-o", out, "./cmd/watchdog")
	build.Dir = clone
	// The default, as a user's shell has it (a CI environment may turn it off).
	build.Env = append(os.Environ(), "GOFLAGS=-buildvcs=true")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	got, err := exec.Command(out, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("version: %v\n%s", err, got)
	}
	t.Logf("%s", got)
	if commit := strings.TrimSpace(string(head))[:12]; !strings.Contains(string(got), "commit "+commit) {
		t.Errorf("version %q lacks the checkout's commit %s", got, commit)
	}
	if strings.Contains(string(got), "watchdog dev ") || strings.Contains(string(got), "built unknown") {
		t.Errorf("version %q: the build info was not used", got)
	}
}
