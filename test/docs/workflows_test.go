package docs

import (
	"strings"
	"testing"

	// YAML 1.2: GitHub reads `on:` as a key, not as YAML 1.1's boolean true.
	"go.yaml.in/yaml/v3"
)

type workflow struct {
	On   map[string]any `yaml:"on"`
	Jobs map[string]struct {
		Steps []struct {
			Uses string `yaml:"uses"`
			Run  string `yaml:"run"`
		} `yaml:"steps"`
	} `yaml:"jobs"`
}

func loadWorkflow(t *testing.T, path string) (workflow, string) {
	t.Helper()
	raw := read(t, path)
	var w workflow
	if err := yaml.Unmarshal([]byte(raw), &w); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var all []string
	for _, j := range w.Jobs {
		for _, s := range j.Steps {
			all = append(all, s.Uses, s.Run)
		}
	}
	return w, strings.Join(all, "\n")
}

// TestWorkflowsRunWhatCIRuns: GitHub runs the project's own entry points, so a
// pull request, main and a tag are tested alike; the release publishes what the
// issue asks for. actionlint (make lint) checks their syntax; this checks intent.
func TestWorkflowsRunWhatCIRuns(t *testing.T) {
	ci, steps := loadWorkflow(t, ".github/workflows/ci.yml")
	if _, ok := ci.On["pull_request"]; !ok {
		t.Error("ci.yml does not run on pull requests")
	}
	if !strings.Contains(steps, "bash .ci/run") {
		t.Error("ci.yml does not run .ci/run")
	}
	rel, steps := loadWorkflow(t, ".github/workflows/release.yml")
	push, _ := rel.On["push"].(map[string]any)
	if tags, _ := push["tags"].([]any); len(tags) != 1 || tags[0] != "v*" {
		t.Errorf("release.yml runs on %v, want push of tags v*", rel.On)
	}
	for _, want := range []string{
		"bash .ci/run", "make image dist chart-package", "hack/release push", "push dist/agentenv-scheduler-watchdog-",
		"sigstore/cosign-installer", "cosign sign --yes", "cosign attest --yes --type cyclonedx",
		"actions/attest-build-provenance", "dist/SHA256SUMS", "dist/*.tar.gz",
	} {
		if !strings.Contains(steps, want) {
			t.Errorf("release.yml lacks %q", want)
		}
	}
	run := read(t, ".ci/run")
	for _, want := range []string{"make test", "make release-check", "make lint"} {
		if !strings.Contains(run, want) {
			t.Errorf(".ci/run lacks %q", want)
		}
	}
	if !strings.Contains(read(t, "hack/lint.sh"), ".github/workflows") {
		t.Error("make lint (hack/lint.sh) does not run actionlint over .github/workflows")
	}
}
