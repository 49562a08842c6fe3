package docs

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// pinned reads NAME="${NAME:-value}" from a hack/ script: the version a tool is built at.
func pinned(t *testing.T, script, name string) string {
	t.Helper()
	m := regexp.MustCompile(name + `="\$\{` + name + `:-([^}]+)\}"`).FindStringSubmatch(read(t, script))
	if m == nil {
		t.Fatalf("%s does not pin %s", script, name)
	}
	return m[1]
}

func chartMeta(t *testing.T) (version, appVersion string) {
	t.Helper()
	var c struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal([]byte(read(t, "charts/agentenv-scheduler-watchdog/Chart.yaml")), &c); err != nil {
		t.Fatal(err)
	}
	return c.Version, c.AppVersion
}

// semverLess compares two MAJOR.MINOR.PATCH versions.
func semverLess(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := range min(len(pa), len(pb)) {
		x, _ := strconv.Atoi(pa[i])
		y, _ := strconv.Atoi(pb[i])
		if x != y {
			return x < y
		}
	}
	return len(pa) < len(pb)
}

func TestLicenseIsMIT(t *testing.T) {
	l := read(t, "LICENSE")
	for _, want := range []string{"MIT License", "Copyright (c)", "Permission is hereby granted, free of charge", `THE SOFTWARE IS PROVIDED "AS IS"`} {
		if !strings.Contains(l, want) {
			t.Errorf("LICENSE lacks %q", want)
		}
	}
}

// TestChangelogHasTheRelease: Keep a Changelog, with an entry for the version the chart
// ships, dated, and a link for it.
func TestChangelogHasTheRelease(t *testing.T) {
	version, appVersion := chartMeta(t)
	// Between releases main's chart is the next version, -dev; appVersion the last image.
	if dev, ok := strings.CutSuffix(version, "-dev"); ok && semverLess(appVersion, dev) {
		version = appVersion
	}
	if version != appVersion {
		t.Errorf("Chart.yaml version %s and appVersion %s differ: docs/versioning.md says they move together (or version is the next one, -dev)", version, appVersion)
	}
	c := read(t, "CHANGELOG.md")
	for _, re := range []string{
		`(?m)^## \[Unreleased\]$`,
		`(?m)^## \[` + regexp.QuoteMeta(appVersion) + `\] - \d{4}-\d{2}-\d{2}$`,
		`(?m)^\[` + regexp.QuoteMeta(appVersion) + `\]: https://`,
		`keepachangelog\.com`,
		`(?m)^### (Added|Changed|Fixed|Removed|Deprecated|Security)$`,
	} {
		if !regexp.MustCompile(re).MatchString(c) {
			t.Errorf("CHANGELOG.md does not match %s", re)
		}
	}
}

// TestCompatibilityTableNamesTestedVersions: the table says what the tests use, so a
// bump of a pinned component without the table fails here.
func TestCompatibilityTableNamesTestedVersions(t *testing.T) {
	v := read(t, "docs/versioning.md")
	for _, pin := range []struct{ script, name string }{
		{"hack/control-plane.sh", "K8S_VERSION"},
		{"hack/control-plane.sh", "ETCD_VERSION"},
		{"hack/tools.sh", "HELM_VERSION"},
		{"hack/alertmanager.sh", "AM_VERSION"},
	} {
		if want := pinned(t, pin.script, pin.name); !strings.Contains(v, want) {
			t.Errorf("docs/versioning.md does not name %s %s (%s)", pin.name, want, pin.script)
		}
	}
	for _, want := range []string{"not tested", "Version policy", "The interface"} {
		if !strings.Contains(v, want) {
			t.Errorf("docs/versioning.md lacks %q", want)
		}
	}
}

// TestReadmeFirstScreen: the README is read in one sitting (at most 250 lines), and
// its operator part, before the documentation links, takes an operator from nothing
// to a watchdog in shadow mode, through the 3 a.m. page, to upgrade and uninstall;
// the developer loop stays.
func TestReadmeFirstScreen(t *testing.T) {
	lines := strings.Split(read(t, "README.md"), "\n")
	if len(lines) > 251 { // the last line ends with a newline
		t.Errorf("the README has %d lines, more than 250: move the details to docs/", len(lines)-1)
	}
	all := strings.Join(lines, "\n")
	first, _, ok := strings.Cut(all, "\n## Documentation\n")
	if !ok {
		t.Fatal("the README has no \"## Documentation\" section of links")
	}
	for _, want := range []string{
		"Kubernetes **1.30", "admissionPolicy.enabled=false", "agentenv-nodes", "9101", "8000",
		"make push REGISTRY=", "helm install watchdog oci://ghcr.io/agentenv/charts/agentenv-scheduler-watchdog",
		"image.digest=sha256:", "decision.shadow=true", "helm test watchdog", "would-restart", "watchdog status", "watchdog backtest",
		"helm upgrade", "helm uninstall", "SHA256SUMS", "docs/design.md", "docs/cli/watchdog.md",
	} {
		if !strings.Contains(first, want) {
			t.Errorf("the README's operator part lacks %q", want)
		}
	}
	// Your own registry comes before the public address: nothing is public yet for
	// many, and most platform teams mirror anyway.
	if strings.Index(first, "make push REGISTRY=") > strings.Index(first, "oci://ghcr.io") {
		t.Error("the README shows the public registry before `make push REGISTRY=...`")
	}
	// At 3 a.m. the history and the evidence bundle come first: the last Job's log is
	// one run, and the restart took the scheduler's log with it.
	_, page, ok := strings.Cut(first, "\n## The 3 a.m. page\n")
	if !ok {
		t.Fatal("the README has no \"## The 3 a.m. page\" section")
	}
	page, _, _ = strings.Cut(page, "\n## ")
	h, e := strings.Index(page, "watchdog history"), strings.Index(page, "--evidence")
	if h < 0 || e < 0 {
		t.Errorf("the 3 a.m. page does not start from `watchdog history` and `--evidence`:\n%s", page)
	}
	if l := strings.Index(page, "kubectl logs"); l >= 0 && l < h {
		t.Error("the 3 a.m. page shows a Job's log before `watchdog history`")
	}
	for _, want := range []string{"make demo", "make test", "(CONTRIBUTING.md)", "(SECURITY.md)", "(LICENSE)", "(CHANGELOG.md)"} {
		if !strings.Contains(all, want) {
			t.Errorf("README lacks %q", want)
		}
	}
	for _, f := range []struct{ file, want string }{
		{"SECURITY.md", "Report a vulnerability"},
		{"SECURITY.md", "Supported versions"},
		{"CONTRIBUTING.md", "make demo"},
		{"CONTRIBUTING.md", "make test"},
		{"CONTRIBUTING.md", "make lint"},
		{"CONTRIBUTING.md", "Adding a test"},
	} {
		if !strings.Contains(read(t, f.file), f.want) {
			t.Errorf("%s lacks %q", f.file, f.want)
		}
	}
}
