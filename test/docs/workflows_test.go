package docs

import (
	"regexp"
	"slices"
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
		"bash .ci/run", "make push dist", "sigstore/cosign-installer", "cosign sign --yes", "cosign attest --yes --type spdxjson",
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
// dist, make push dist), and actions/cache saves the tools cache
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

// usesLine is a step's action reference as written, with its trailing comment.
var usesLine = regexp.MustCompile(`(?m)^\s*(?:-\s+)?uses:\s*([^\s@]+)@(\S+)[ \t]*(?:#[ \t]*(\S+))?`)

// TestWorkflowsPinActionsByCommit: a tag of an action can be moved by whoever
// controls its repository; a commit cannot. Every action is pinned by its full
// commit SHA, with the release tag it was taken from as a comment for people
// (and for update bots).
func TestWorkflowsPinActionsByCommit(t *testing.T) {
	sha := regexp.MustCompile(`^[0-9a-f]{40}$`)
	tag := regexp.MustCompile(`^v\d+\.\d+\.\d+$`)
	for _, path := range []string{".github/workflows/ci.yml", ".github/workflows/release.yml"} {
		uses := usesLine.FindAllStringSubmatch(read(t, path), -1)
		if len(uses) == 0 {
			t.Errorf("%s: no action found", path)
		}
		for _, u := range uses {
			if !sha.MatchString(u[2]) || !tag.MatchString(u[3]) {
				t.Errorf("%s: %s@%s (comment %q): want a 40-hex commit SHA and its release tag as a comment (# vX.Y.Z)", path, u[1], u[2], u[3])
			}
		}
	}
}

// TestReleaseJobTrustsNothingBeforeIt: the tests run as root (a test makes a
// network namespace), and a process a test starts could outlive its step. So the
// tests run in a job that can write nothing, and every job that writes runs
// after it on a fresh runner: no cache restored (a cached tool could be anyone's:
// the cached helm would receive the registry token), nothing as root, no test,
// every tool built afresh from the Go module proxy, verified against the Go
// checksum database. The job that builds (and so runs every module's code)
// holds no OIDC token: the signing identity lives in a job of its own, behind a
// protected environment, that builds nothing and signs the digests the build
// job pushed.
func TestReleaseJobTrustsNothingBeforeIt(t *testing.T) {
	raw := read(t, ".github/workflows/release.yml")
	type step struct {
		Uses string            `yaml:"uses"`
		Run  string            `yaml:"run"`
		With map[string]any    `yaml:"with"`
		Env  map[string]string `yaml:"env"`
	}
	var w struct {
		Permissions map[string]string `yaml:"permissions"`
		Env         map[string]string `yaml:"env"`
		Jobs        map[string]struct {
			Needs       any               `yaml:"needs"`
			Environment any               `yaml:"environment"`
			Permissions map[string]string `yaml:"permissions"`
			Env         map[string]string `yaml:"env"`
			Steps       []step            `yaml:"steps"`
		} `yaml:"jobs"`
	}
	if err := yaml.Unmarshal([]byte(raw), &w); err != nil {
		t.Fatal(err)
	}
	for k, v := range w.Permissions {
		if v != "read" && v != "none" {
			t.Errorf("release.yml grants %s: %s to every job", k, v)
		}
	}
	var testJob, buildJob, signJob string
	for name, job := range w.Jobs {
		writes := false
		for _, v := range job.Permissions {
			writes = writes || v == "write"
		}
		var runs []string
		for _, s := range job.Steps {
			runs = append(runs, s.Run)
		}
		all := strings.Join(runs, "\n")
		builds := strings.Contains(all, "make ") || strings.Contains(all, "go run") || strings.Contains(all, "go build")
		switch {
		case strings.Contains(all, ".ci/run"):
			testJob = name
			if writes {
				t.Errorf("job %s runs the tests with write permissions %v", name, job.Permissions)
			}
			continue
		case builds && writes:
			buildJob = name
			for _, want := range []string{"WATCHDOG_CACHE_DIR=${RUNNER_TEMP}", "GOTOOLCHAIN=", "GITHUB_PATH"} {
				if !strings.Contains(all, want) {
					t.Errorf("build job %s lacks %q: tools must be built afresh by a verified toolchain", name, want)
				}
			}
		case job.Permissions["id-token"] == "write":
			signJob = name
		}
		if job.Permissions["id-token"] == "write" {
			if builds {
				t.Errorf("job %s holds id-token: write and builds (runs make or go): whatever a module's code does there can sign as this workflow", name)
			}
			if job.Environment == nil {
				t.Errorf("job %s holds id-token: write outside a protected environment (environment:)", name)
			}
		}
		if !writes {
			continue
		}
		for _, s := range job.Steps {
			if strings.HasPrefix(s.Uses, "actions/cache") {
				t.Errorf("job %s writes and restores a cache (%s)", name, s.Uses)
			}
			if strings.Contains(s.Run, "sudo") || strings.Contains(s.Run, "make test") || strings.Contains(s.Run, "release-check") {
				t.Errorf("job %s writes and runs tests or root:\n%s", name, s.Run)
			}
			if strings.HasPrefix(s.Uses, "actions/checkout") && s.With["persist-credentials"] != false {
				t.Errorf("job %s keeps the checkout's credentials", name)
			}
		}
		for _, env := range []map[string]string{w.Env, job.Env} {
			for _, k := range []string{"GONOSUMDB", "GONOSUMCHECK", "GOINSECURE", "GOPRIVATE", "GOFLAGS"} {
				if _, ok := env[k]; ok {
					t.Errorf("release.yml sets %s: the Go checksum database must check every module", k)
				}
			}
			if v, ok := env["GOSUMDB"]; ok && v != "sum.golang.org" {
				t.Errorf("release.yml sets GOSUMDB=%s", v)
			}
		}
	}
	if testJob == "" || buildJob == "" || signJob == "" {
		t.Fatalf("release.yml: want a job running the tests without write permissions, one building without id-token and one signing; found %q, %q, %q", testJob, buildJob, signJob)
	}
	needs := func(job, dep string) bool {
		n := w.Jobs[job].Needs
		return n == dep || slices.Contains(anySlice(n), any(dep))
	}
	if !needs(buildJob, testJob) {
		t.Errorf("build job %s does not need the test job %s", buildJob, testJob)
	}
	if !needs(signJob, buildJob) {
		t.Errorf("signing job %s does not need the build job %s (it signs the digests that job pushed)", signJob, buildJob)
	}
	if !strings.Contains(raw, "needs."+buildJob+".outputs.") {
		t.Errorf("release.yml signs no digest the build job %s output (needs.%s.outputs.*)", buildJob, buildJob)
	}
}

func anySlice(v any) []any {
	s, _ := v.([]any)
	return s
}
