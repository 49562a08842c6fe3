// Command kustomize writes deploy/kustomize (a base and the overlays shadow and live)
// and dist/install.yaml from the Helm chart, so that they never drift from it: `make
// kustomize` and `make manifests` run it, and a test (test/chart) fails when the
// committed files differ from what it would write.
//
// The base is `helm template` of the chart's defaults in shadow mode
// (decision.shadow: true, the recommended first week), for the namespace
// agentenv-system, split into one file per part (RBAC, ConfigMaps, CronJob, policy),
// without Helm's hooks (the `helm test` Pod: docs/gitops.md has the doctor Job that
// replaces it) and without Helm's own labels. The overlay live is the one difference
// decision.shadow: false makes, WATCHDOG_SHADOW=false, as a patch.
//
//	go run ./hack/kustomize                      rewrite deploy/kustomize
//	go run ./hack/kustomize -install dist/install.yaml   also write the one-file install
//	go run ./hack/kustomize -check               exit 1 if deploy/kustomize is not current
package main

import (
	"bytes"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

const (
	release   = "agentenv-scheduler-watchdog"
	namespace = "agentenv-system"
	header    = "# Generated from charts/agentenv-scheduler-watchdog by `make kustomize` (hack/kustomize): edit the chart, not this file.\n"
)

// parts: which file of the base each kind goes to, in kustomization order.
var parts = []struct {
	file  string
	kinds []string
}{
	{"rbac.yaml", []string{"ServiceAccount", "Role", "RoleBinding"}},
	{"configmaps.yaml", []string{"ConfigMap"}},
	{"cronjob.yaml", []string{"CronJob"}},
	{"policy.yaml", []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}},
}

// liveKustomization patches WATCHDOG_SHADOW by its index in the CronJob's env (a
// JSON patch, which keeps the env's order, as the chart renders it; a strategic
// merge would move the variable first), after testing that it is that variable.
const liveKustomization = header + `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
# Restarts for real: the watchdog after its shadow week (docs/gitops.md).
resources:
  - ../../base
patches:
  - target:
      kind: CronJob
      name: agentenv-scheduler-watchdog
    patch: |-
      - op: test
        path: /spec/jobTemplate/spec/template/spec/containers/0/env/%[1]d/name
        value: WATCHDOG_SHADOW
      - op: replace
        path: /spec/jobTemplate/spec/template/spec/containers/0/env/%[1]d/value
        value: "false"
`

const shadowKustomization = header + `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
# Shadow mode, the recommended first week: records would-restart, restarts nothing.
resources:
  - ../../base
`

func main() {
	chart := flag.String("chart", "charts/agentenv-scheduler-watchdog", "the chart")
	out := flag.String("out", "deploy/kustomize", "the kustomize directory")
	install := flag.String("install", "", "also write the one-file install (make manifests: dist/install.yaml)")
	check := flag.Bool("check", false, "write nothing: exit 1 if the kustomize directory is not current")
	flag.Parse()
	if err := run(*chart, *out, *install, *check); err != nil {
		fmt.Fprintln(os.Stderr, "kustomize:", err)
		os.Exit(1)
	}
}

func run(chart, out, install string, check bool) error {
	manifest, err := render(chart)
	if err != nil {
		return err
	}
	files, all, err := split(manifest)
	if err != nil {
		return err
	}
	i, err := shadowIndex(files["base/cronjob.yaml"])
	if err != nil {
		return err
	}
	files["overlays/live/kustomization.yaml"] = fmt.Sprintf(liveKustomization, i)
	files["overlays/shadow/kustomization.yaml"] = shadowKustomization
	var stale []string
	for _, name := range slices.Sorted(maps.Keys(files)) {
		path := filepath.Join(out, name)
		if check {
			if got, err := os.ReadFile(path); err != nil || string(got) != files[name] {
				stale = append(stale, path)
			}
			continue
		}
		if err := write(path, files[name]); err != nil {
			return err
		}
	}
	if len(stale) > 0 {
		return fmt.Errorf("not what the chart renders (run make kustomize): %s", strings.Join(stale, ", "))
	}
	if install != "" && !check {
		return write(install, all)
	}
	return nil
}

func write(path, text string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(text), 0o644)
}

// shadowIndex is the index of WATCHDOG_SHADOW in the CronJob's container env.
func shadowIndex(cronJob string) (int, error) {
	var cj struct {
		Spec struct {
			JobTemplate struct {
				Spec struct {
					Template struct {
						Spec struct {
							Containers []struct{ Env []struct{ Name string } }
						}
					}
				}
			} `yaml:"jobTemplate"`
		}
	}
	dec := yaml.NewDecoder(strings.NewReader(cronJob))
	if err := dec.Decode(&cj); err != nil {
		return 0, fmt.Errorf("the CronJob: %v", err)
	}
	if cs := cj.Spec.JobTemplate.Spec.Template.Spec.Containers; len(cs) > 0 {
		for i, e := range cs[0].Env {
			if e.Name == "WATCHDOG_SHADOW" {
				return i, nil
			}
		}
	}
	return 0, fmt.Errorf("the CronJob's container has no WATCHDOG_SHADOW")
}

// render is `helm template` of the defaults in shadow mode; helm is $HELM or hack/tools.sh's.
func render(chart string) (string, error) {
	helm := os.Getenv("HELM")
	if helm == "" {
		p, err := exec.Command("hack/tools.sh", "--print").Output()
		if err != nil {
			return "", fmt.Errorf("no helm: set HELM or run hack/tools.sh: %v", err)
		}
		helm = strings.TrimSpace(string(p))
	}
	cmd := exec.Command(helm, "template", release, chart, "--namespace", namespace, "--set", "decision.shadow=true")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	manifest, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("helm template: %v: %s", err, stderr.String())
	}
	return string(manifest), nil
}

// split files the rendered documents by part, without hooks, "# Source:" lines and
// Helm's labels; all is the whole install in one file, in the same order.
func split(manifest string) (files map[string]string, all string, err error) {
	byKind := map[string][]string{}
	for _, doc := range strings.Split(manifest, "\n---\n") {
		var meta struct {
			Kind     string
			Metadata struct{ Annotations map[string]string }
		}
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			return nil, "", fmt.Errorf("a rendered document: %v", err)
		}
		if meta.Kind == "" {
			continue
		}
		if _, hook := meta.Metadata.Annotations["helm.sh/hook"]; hook {
			continue // helm test's Pod: docs/gitops.md has the doctor Job
		}
		byKind[meta.Kind] = append(byKind[meta.Kind], clean(doc))
	}
	files = map[string]string{}
	var resources []string
	var whole strings.Builder
	whole.WriteString(header)
	for _, p := range parts {
		var docs []string
		for _, k := range p.kinds {
			docs = append(docs, byKind[k]...)
			delete(byKind, k)
		}
		if len(docs) == 0 {
			continue
		}
		files["base/"+p.file] = header + "---\n" + strings.Join(docs, "---\n")
		resources = append(resources, "  - "+p.file+"\n")
		whole.WriteString("---\n" + strings.Join(docs, "---\n"))
	}
	if len(byKind) > 0 {
		return nil, "", fmt.Errorf("kinds with no file in the base: %v (add them to parts)", slices.Sorted(maps.Keys(byKind)))
	}
	files["base/kustomization.yaml"] = header + "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n" +
		"# The chart's defaults in shadow mode, namespace agentenv-system; no helm test Pod.\nresources:\n" + strings.Join(resources, "")
	return files, whole.String(), nil
}

// clean drops helm's "# Source:" line and labels: Helm does not manage these objects.
func clean(doc string) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimPrefix(strings.TrimSpace(doc+"\n"), "---\n"), "\n") {
		t := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(t, "# Source: "), strings.HasPrefix(t, "helm.sh/chart: "):
			continue
		case t == "app.kubernetes.io/managed-by: Helm":
			line = strings.Replace(line, "Helm", "kustomize", 1)
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}
