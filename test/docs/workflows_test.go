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

// TestWorkflowsGiveBackWhatRootBuilt: .ci/run runs as root (a test makes a network
// namespace), so the checkout's bin/ and dist/, Go's caches and the tools cache
// come out owned by root. The release's later steps run as the runner user (rm -rf
// dist, make image, go run ./hack/release), and actions/cache saves the tools cache
// as that user after the job: each workflow hands them back right after .ci/run,
// even when it failed.
func TestWorkflowsGiveBackWhatRootBuilt(t *testing.T) {
	for _, path := range []string{".github/workflows/ci.yml", ".github/workflows/release.yml"} {
		raw := read(t, path)
		var w struct {
			Jobs map[string]struct {
				Steps []struct {
					If  string `yaml:"if"`
					Run string `yaml:"run"`
				} `yaml:"steps"`
			} `yaml:"jobs"`
		}
		if err := yaml.Unmarshal([]byte(raw), &w); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for name, job := range w.Jobs {
			for i, s := range job.Steps {
				if !strings.Contains(s.Run, "sudo") || !strings.Contains(s.Run, ".ci/run") {
					continue
				}
				if i+1 >= len(job.Steps) {
					t.Errorf("%s job %s: nothing after the root .ci/run gives its files back", path, name)
					continue
				}
				next := job.Steps[i+1]
				for _, want := range []string{"sudo chown -R", `"$(id -u):$(id -g)"`, "GITHUB_WORKSPACE", "GOCACHE", "GOMODCACHE", ".cache/agentenv-watchdog"} {
					if !strings.Contains(next.Run, want) {
						t.Errorf("%s job %s: the step after the root .ci/run lacks %q:\n%s", path, name, want, next.Run)
					}
				}
				if !strings.Contains(next.If, "always()") {
					t.Errorf("%s job %s: the step giving the files back runs only on success (if: %q); the cache is saved after a failure too", path, name, next.If)
				}
			}
		}
	}
}
