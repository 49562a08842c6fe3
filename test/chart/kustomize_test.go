package chart

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/agentenv/watchdog/internal/testenv"
)

// TestKustomizeIsTheChart: deploy/kustomize and dist/install.yaml are what `make
// kustomize` (hack/kustomize) writes from the chart now, so they cannot drift; and
// `kubectl kustomize` of each overlay, with kubectl alone, is the chart's own render
// of that mode, object for object (Helm's labels aside), without the helm test Pod.
// Seen failing first: the base was edited by hand (a changed schedule).
func TestKustomizeIsTheChart(t *testing.T) {
	root := filepath.Dir(filepath.Dir(chartDir))
	gen := exec.Command("go", "run", "./hack/kustomize", "-check")
	gen.Dir = root
	gen.Env = append(os.Environ(), "HELM="+helmBin)
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("deploy/kustomize is stale: %v\n%s", err, out)
	}
	// dist/install.yaml (make manifests) is the base in one file, byte for byte the same at every run.
	dir := t.TempDir()
	var install string
	for i := range 2 {
		gen := exec.Command("go", "run", "./hack/kustomize", "-out", filepath.Join(dir, "k"), "-install", filepath.Join(dir, "install.yaml"))
		gen.Dir = root
		gen.Env = append(os.Environ(), "HELM="+helmBin)
		if out, err := gen.CombinedOutput(); err != nil {
			t.Fatalf("hack/kustomize: %v\n%s", err, out)
		}
		raw, err := os.ReadFile(filepath.Join(dir, "install.yaml"))
		must(t, err)
		if i == 1 && string(raw) != install {
			t.Fatalf("two runs wrote different install.yaml")
		}
		install = string(raw)
	}

	assets, err := testenv.Assets()
	must(t, err)
	kubectl := filepath.Join(assets, "kubectl")
	for overlay, shadow := range map[string]string{"shadow": "true", "live": "false"} {
		out, err := exec.Command(kubectl, "kustomize", filepath.Join(root, "deploy", "kustomize", "overlays", overlay)).Output()
		if err != nil {
			t.Fatalf("kubectl kustomize overlays/%s: %v", overlay, err)
		}
		got := objects(t, string(out))
		want := objects(t, mustHelm(t, "template", "agentenv-scheduler-watchdog", chartDir, "--namespace", "agentenv-system", "--set", "decision.shadow="+shadow))
		for k := range want {
			if strings.HasPrefix(k, "Pod/") {
				delete(want, k) // helm test's, a hook
			}
		}
		for k := range got {
			if strings.HasPrefix(k, "Pod/") {
				t.Errorf("overlays/%s renders a Pod %s: a hook has no place outside Helm", overlay, k)
			}
		}
		if !reflect.DeepEqual(keys(got), keys(want)) {
			t.Fatalf("overlays/%s objects %v, the chart's %v", overlay, keys(got), keys(want))
		}
		for k, w := range want {
			if !reflect.DeepEqual(got[k], w) {
				t.Errorf("overlays/%s: %s differs from the chart's render with decision.shadow=%s", overlay, k, shadow)
			}
		}
	}
}

// objects decodes a manifest by kind/name (parse), without the labels that say who manages it.
func objects(t *testing.T, manifest string) map[string]map[string]any {
	t.Helper()
	objs := map[string]map[string]any{}
	for _, o := range parse(t, manifest).objs {
		unlabel(o.Object)
		objs[o.GetKind()+"/"+o.GetName()] = o.Object
	}
	return objs
}

// unlabel drops helm.sh/chart and app.kubernetes.io/managed-by from every labels map.
func unlabel(v any) {
	switch v := v.(type) {
	case map[string]any:
		if l, ok := v["labels"].(map[string]any); ok {
			delete(l, "helm.sh/chart")
			delete(l, "app.kubernetes.io/managed-by")
		}
		for _, c := range v {
			unlabel(c)
		}
	case []any:
		for _, c := range v {
			unlabel(c)
		}
	}
}

func keys(m map[string]map[string]any) []string { return slices.Sorted(maps.Keys(m)) }
