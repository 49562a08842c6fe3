package decide_test

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// The pure core's imports show that it is pure: nothing pkg/decide imports, directly
// or through another package, talks to the API server. The state document's codec
// (pkg/state) and endpoint counting (pkg/endpoints) are pure; the ConfigMap store
// (pkg/statestore) and the EndpointSlice lister (pkg/observe) are not.
func TestDecideImportsNothingThatTalksToTheAPI(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		var stderr []byte
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		t.Fatalf("go list -deps: %v\n%s", err, stderr)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 || deps[len(deps)-1] != "github.com/agentenv/watchdog/pkg/decide" {
		t.Fatalf("go list -deps did not list pkg/decide last: %q", deps)
	}
	const module = "github.com/agentenv/watchdog/"
	forbidden := []string{
		"k8s.io/client-go/", // rest, kubernetes, tools/…: every API client
		module + "pkg/kube",
		module + "pkg/statestore",
		module + "pkg/observe",
		module + "pkg/restart",
		module + "pkg/events",
		module + "pkg/leader",
	}
	for _, dep := range deps {
		for _, f := range forbidden {
			if dep == f || strings.HasPrefix(dep, strings.TrimSuffix(f, "/")+"/") {
				t.Errorf("pkg/decide depends on %s: the pure core must not talk to the API", dep)
			}
		}
	}
}
