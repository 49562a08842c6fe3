package chart

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/agentenv/watchdog/internal/testenv"
)

// valuesPath is values.yaml in the repository.
const valuesPath = "charts/agentenv-scheduler-watchdog/values.yaml"

// git runs git in the repository and returns its stdout.
func git(t *testing.T, args ...string) []byte {
	t.Helper()
	root := filepath.Dir(filepath.Dir(chartDir))
	cmd := exec.Command("git", append([]string{"-C", root}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// valueKeys are the dotted paths of every value a values.yaml defines.
func valueKeys(t *testing.T, doc []byte) []string {
	t.Helper()
	var m map[string]any
	must(t, yaml.Unmarshal(doc, &m))
	var keys []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			keys = append(keys, prefix+k)
			if sub, ok := v.(map[string]any); ok {
				walk(prefix+k+".", sub)
			}
		}
	}
	walk("", m)
	slices.Sort(keys)
	return keys
}

// previousCharts extracts, into temporary folders, the chart as it was before each
// of the n newest commits that changed the set of values (added, removed or
// renamed one), newest first, and returns their paths and those commits.
func previousCharts(t *testing.T, n int) (dirs, revs []string) {
	t.Helper()
	current, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	must(t, err)
	keys := valueKeys(t, current)
	for _, rev := range strings.Fields(string(git(t, "log", "--format=%H", "--", valuesPath))) {
		if len(dirs) == n {
			break
		}
		parent := rev + "^"
		before := valueKeys(t, git(t, "show", parent+":"+valuesPath))
		if slices.Equal(before, keys) {
			continue
		}
		keys = before
		dir := t.TempDir()
		archive := git(t, "archive", parent, filepath.Dir(valuesPath))
		tar := exec.Command("tar", "-x", "-C", dir)
		tar.Stdin = bytes.NewReader(archive)
		if out, err := tar.CombinedOutput(); err != nil {
			t.Fatalf("extract the chart of %s: %v\n%s", parent, err, out)
		}
		dirs, revs = append(dirs, filepath.Join(dir, filepath.Dir(valuesPath))), append(revs, rev)
	}
	if len(dirs) == 0 {
		t.Fatal("no commit in the history changed the chart's set of values (a shallow clone?): nothing to upgrade from")
	}
	return dirs, revs
}

// readmeUpgradeFlags are the flags of the README's `helm upgrade` command (its
// "Upgrade and uninstall" section), without the chart's address and version.
func readmeUpgradeFlags(t *testing.T) []string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(chartDir)), "README.md"))
	must(t, err)
	_, section, _ := strings.Cut(string(readme), "\n## Upgrade and uninstall\n")
	cmd := regexp.MustCompile("`(helm upgrade [^`]+)`").FindStringSubmatch(section)
	if cmd == nil {
		t.Fatal("README's \"Upgrade and uninstall\" section has no `helm upgrade ...` command")
	}
	var flags []string
	fields := strings.Fields(cmd[1])
	for i := 0; i < len(fields); i++ {
		switch f := fields[i]; {
		case f == "--version" || f == "-n" || f == "--namespace":
			i++ // its argument: this test's own
		case strings.HasPrefix(f, "-"):
			flags = append(flags, f)
		}
	}
	return flags
}

// TestUpgradeFromThePreviousChart: the chart as it was before each of the last
// changes to its set of values (taken from git history), installed with a user's
// own values, upgraded to this chart with the README's own command, gives a
// watchdog whose run succeeds and that kept the user's values. (With --reuse-values
// helm reuses the old release's computed values without the new chart's defaults:
// a new value is missing, and the upgrade is refused by the schema or the run
// exits 2.)
func TestUpgradeFromThePreviousChart(t *testing.T) {
	flags := readmeUpgradeFlags(t)
	dirs, revs := previousCharts(t, upgradeHistory)
	for i, old := range dirs {
		t.Run(revs[i][:12], func(t *testing.T) {
			t.Logf("upgrading from the chart before %.12s with: helm upgrade %s", revs[i], strings.Join(flags, " "))
			upgradeFrom(t, old, flags)
		})
	}
}

// upgradeHistory is how many earlier value sets TestUpgradeFromThePreviousChart
// upgrades from: enough to reach past a round of additions.
const upgradeHistory = 6

func upgradeFrom(t *testing.T, old string, flags []string) {
	ctx, cancel := testenv.Ctx()
	defer cancel()
	ns, err := env.CreateNamespace(ctx, "chart-upgrade")
	must(t, err)
	// The user's own choices, given at install as the README's install does.
	mustHelm(t, "install", release, old, "--namespace", ns, "--kubeconfig", env.Kubeconfig,
		"--set", "alerts.clusterName=envtest", "--set", "restart.maxRestarts=2")
	sched := layOutScheduler(t, ns, fixture(t, "scheduler-metrics-healthy.txt"))
	mustHelm(t, append([]string{"upgrade", release, chartDir, "--namespace", ns, "--kubeconfig", env.Kubeconfig}, flags...)...)

	kubeconfig, _ := saKubeconfig(t, ns, fullname)
	wd := cronJobWatchdog(t, ns, kubeconfig)
	for _, want := range []string{"WATCHDOG_MAX_RESTARTS=2", "WATCHDOG_CLUSTER_NAME=envtest"} {
		if !slices.Contains(wd.env, want) {
			t.Errorf("the upgrade lost the user's value: no %s", want)
		}
	}
	// A new RoleBinding reaches the authorizer quickly, but not instantly; a
	// configuration error (exit 2) does not heal by waiting.
	var r runResult
	waitFor(t, 10*time.Second, "a run with the upgraded release's rights", func() bool {
		r = wd.check("--metrics-port", strconv.Itoa(sched.metrics.Port()))
		return r.code != 1
	})
	if r.code != 0 {
		t.Fatalf("the upgraded release's run: exit %d\n%s", r.code, r.stderr)
	}
	r.expect(t, 0, "healthy", "none")
}
