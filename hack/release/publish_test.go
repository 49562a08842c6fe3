package main

import (
	"bytes"
	"encoding/base64"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentenv/watchdog/internal/testenv"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestPublishToARegistryWithAuthentication is `make push` against a real OCI
// registry (go-containerregistry's, on loopback) that wants basic auth: without
// credentials it fails saying how to log in, and pushes nothing; with them in a
// Docker config (what `docker login` writes) the image index, its SBOM artifact
// and the chart are pushed, their digests printed, and the printed helm install
// line resolves the chart and pins the pushed image.
func TestPublishToARegistryWithAuthentication(t *testing.T) {
	root, helm := helmTool(t)
	work := t.TempDir()
	// helm and the keychain read only what this test gives them.
	for k, v := range map[string]string{"DOCKER_CONFIG": filepath.Join(work, "docker"), "HELM_CONFIG_HOME": filepath.Join(work, "helm-config"),
		"HELM_CACHE_HOME": filepath.Join(work, "helm-cache"), "HELM_DATA_HOME": filepath.Join(work, "helm-data"),
		"HELM_REGISTRY_CONFIG": filepath.Join(work, "helm-config", "registry.json")} {
		t.Setenv(k, v)
	}

	// The release's artifacts: an image index in a layout, two SBOMs, the chart.
	dir := filepath.Join(work, "image")
	lp, err := layout.Write(dir, empty.Index)
	must(t, err)
	idx, err := random.Index(256, 1, 2)
	must(t, err)
	must(t, lp.AppendIndex(idx))
	sboms := filepath.Join(work, "sbom")
	must(t, os.MkdirAll(sboms, 0o755))
	for _, p := range []string{"linux_amd64", "linux_arm64"} {
		must(t, os.WriteFile(filepath.Join(sboms, "watchdog_"+p+".cdx.json"), []byte(`{"bomFormat":"CycloneDX","specVersion":"1.6","metadata":{"component":{"name":"watchdog `+p+`"}}}`), 0o644))
	}
	if out, err := exec.Command(helm, "package", filepath.Join(root, "charts", "agentenv-scheduler-watchdog"), "--destination", work).CombinedOutput(); err != nil {
		t.Fatalf("helm package: %v\n%s", err, out)
	}
	charts, _ := filepath.Glob(filepath.Join(work, "agentenv-scheduler-watchdog-*.tgz"))
	if len(charts) != 1 {
		t.Fatalf("helm package made %v", charts)
	}
	meta, err := chartMetadata(charts[0])
	must(t, err)

	const user, pass = "ci", "pw-5e1c9b"
	reg := httptest.NewServer(basicAuth(registry.New(registry.WithReferrersSupport(true), registry.Logger(log.New(io.Discard, "", 0))), user, pass)) // 127.0.0.1 only
	t.Cleanup(reg.Close)
	host := strings.TrimPrefix(reg.URL, "http://")
	args := []string{"--registry", host + "/platform", "--layout", dir, "--sbom-dir", sboms, "--chart", charts[0], "--helm", helm, "--insecure"}

	var stdout bytes.Buffer
	err = publishCommand(args, &stdout)
	if err == nil || !strings.Contains(err.Error(), "docker login "+host) {
		t.Fatalf("push without credentials: %v, want a refusal saying `docker login %s`", err, host)
	}
	if strings.Contains(err.Error(), pass) {
		t.Errorf("the error shows the password: %v", err)
	}
	repo, err := name.NewRepository(host+"/platform/"+imageRepo, name.Insecure)
	must(t, err)
	auth := remote.WithAuth(&authn.Basic{Username: user, Password: pass})
	if tags, err := remote.List(repo, auth); err == nil && len(tags) > 0 {
		t.Errorf("without credentials, tags %v were pushed", tags)
	}

	// What `docker login` writes; helm reads it too.
	must(t, os.MkdirAll(filepath.Join(work, "docker"), 0o700))
	must(t, os.WriteFile(filepath.Join(work, "docker", "config.json"),
		[]byte(`{"auths":{"`+host+`":{"auth":"`+base64.StdEncoding.EncodeToString([]byte(user+":"+pass))+`"}}}`), 0o600))
	stdout.Reset()
	if err := publishCommand(args, &stdout); err != nil {
		t.Fatalf("push with the credentials in the Docker config: %v", err)
	}
	printed := stdout.String()
	t.Logf("make push printed:\n%s", printed)
	digest, err := idx.Digest()
	must(t, err)
	if !strings.Contains(printed, repo.String()+"@"+digest.String()) {
		t.Errorf("the image digest %s is not printed", digest)
	}
	served, err := remote.Head(repo.Tag(meta.AppVersion), auth)
	must(t, err)
	if served.Digest != digest {
		t.Errorf("the registry serves %s under %s, want the index %s", served.Digest, meta.AppVersion, digest)
	}
	refs, err := remote.Referrers(repo.Digest(digest.String()), auth)
	must(t, err)
	rm, err := refs.IndexManifest()
	must(t, err)
	if len(rm.Manifests) != 1 || !strings.Contains(printed, rm.Manifests[0].Digest.String()) {
		t.Fatalf("referrers of the image: %+v, want the one SBOM artifact, its digest printed", rm.Manifests)
	}
	sbom, err := remote.Image(repo.Digest(rm.Manifests[0].Digest.String()), auth)
	must(t, err)
	if m, err := sbom.Manifest(); err != nil || m.ArtifactType != sbomType || m.Subject == nil || m.Subject.Digest != digest {
		t.Errorf("the SBOM artifact's manifest: %+v, %v; want artifactType %s, subject %s", m, err, sbomType, digest)
	}
	layers, err := sbom.Layers()
	must(t, err)
	if len(layers) != 2 {
		t.Errorf("the SBOM artifact has %d layers, want one per platform", len(layers))
	}
	chartRef, err := name.NewTag(host+"/platform/charts/agentenv-scheduler-watchdog:"+meta.Version, name.Insecure)
	must(t, err)
	chartDesc, err := remote.Head(chartRef, auth)
	must(t, err)
	if !strings.Contains(printed, chartDesc.Digest.String()) {
		t.Errorf("the chart's digest %s is not printed", chartDesc.Digest)
	}

	// The printed install line works as printed (rendered here: no cluster).
	_, line, ok := strings.Cut(printed, "helm install ")
	if !ok {
		t.Fatalf("no helm install line printed")
	}
	install := strings.Fields(strings.TrimSpace(line))
	rendered, err := exec.Command(helm, append(append([]string{"template"}, install...), "--kube-version", "1.33.0")...).CombinedOutput()
	if err != nil {
		t.Fatalf("helm template %s: %v\n%s", strings.Join(install, " "), err, rendered)
	}
	if want := repo.String() + "@" + digest.String(); !strings.Contains(string(rendered), want) {
		t.Errorf("the install line's chart does not run %s", want)
	}
}

var must = testenv.Must
