//go:build release

package release

import (
	"bytes"
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// helmIn runs helm with env added to the test's environment (HELM_*_HOME: the
// test's own logins and caches) and stdin.
func helmIn(t *testing.T, env []string, stdin io.Reader, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, helmBin, args...)
	cmd.Env = append(cmd.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String() + stderr.String()
}

// TestReleasePushesTheIndex: the release workflow's own push command (`release
// push`) puts the layout's index, both platforms, under the tag on a real OCI
// registry (go-containerregistry's, on loopback) and prints its digest. What a
// user installs from a registry: TestMakePushToYourOwnRegistry.
func TestReleasePushesTheIndex(t *testing.T) {
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0)))) // 127.0.0.1 only
	t.Cleanup(reg.Close)
	repo := strings.TrimPrefix(reg.URL, "http://") + "/agentenv/scheduler-watchdog"

	out, err := exec.Command(releaseBin, "push", "--layout", dist+"/image", "--ref", repo+":"+version, "--insecure").CombinedOutput()
	if err != nil {
		t.Fatalf("release push: %v\n%s", err, out)
	}
	digest := strings.TrimSpace(string(out))
	local, err := imageIndex(t).Digest()
	must(t, err)
	if digest != local.String() {
		t.Fatalf("push printed %s, the layout's index is %s", digest, local)
	}
	// What the registry now serves under the tag is that index, both platforms in it.
	ref, err := name.NewTag(repo+":"+version, name.Insecure)
	must(t, err)
	desc, err := remote.Get(ref)
	must(t, err)
	if desc.Digest.String() != digest || !desc.MediaType.IsIndex() {
		t.Fatalf("the registry serves %s (%s) for %s, want the index %s", desc.Digest, desc.MediaType, ref, digest)
	}
	served, err := desc.ImageIndex()
	must(t, err)
	m, err := served.IndexManifest()
	must(t, err)
	if len(m.Manifests) != 2 {
		t.Errorf("the pushed index lists %d images, want 2", len(m.Manifests))
	}
}
