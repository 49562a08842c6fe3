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
	env = strings.Fields(envPart)
	ldflags := regexp.MustCompile(`-ldflags "([^"]*)"`).FindStringSubmatch(cmdPart)
	if ldflags == nil {
		t.Fatalf("cannot read -ldflags from %s", cmdPart)
	}
	rest := strings.Replace(cmdPart, ldflags[0], "", 1)
	args = append([]string{"build", "-ldflags", ldflags[1]}, strings.Fields(rest)...)
	return env, args
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
	for _, want := range []string{"v9.9.9-test", "abc1234", "2026-11-30T00:00:00Z"} {
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
