//go:build release

package release

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentenv/watchdog/internal/testenv"
)

// TestMakePushToYourOwnRegistry is the README's own-registry install, as a user
// runs it, against private OCI registries on loopback (`release registry`, the
// one the real node pulls from) that refuse anyone without the password: one
// asks for basic auth, given from a Docker config as `docker login` writes it;
// one for a bearer token (the token auth of Harbor, GitLab, Artifactory) over
// https with a private CA (SSL_CERT_FILE), the password given by a credential
// helper. Each time the real `make push REGISTRY=...` (INSECURE=1 for the plain
// http one) must put the image index (both platforms, built by ko as `make image`
// built dist/image), its SBOMs and the chart in the registry at the digests it
// prints; then the last helm install line it
// printed is run as printed, after `helm registry login` and with no Docker
// config, onto a real API server, and the CronJob and the helm test hook must
// run the pushed index.
func TestMakePushToYourOwnRegistry(t *testing.T) {
	work := t.TempDir()
	const user, pass = "platform-ci", "pw-7d41c0e9"
	// Only the directories this test writes hold credentials.
	helmEnv := []string{"HELM_CONFIG_HOME=" + filepath.Join(work, "helm", "config"), "HELM_CACHE_HOME=" + filepath.Join(work, "helm", "cache"),
		"HELM_DATA_HOME=" + filepath.Join(work, "helm", "data"), "HELM_REGISTRY_CONFIG=" + filepath.Join(work, "helm", "config", "registry.json")}
	helper := filepath.Join(work, "helper")
	must(t, os.MkdirAll(helper, 0o755))
	must(t, os.WriteFile(filepath.Join(helper, "docker-credential-watchdog-test"), []byte(`#!/bin/sh
# A Docker credential helper (get only) that knows the test registries.
[ "$1" = get ] || exit 1
read -r server
case "$server" in *127.0.0.1:*) printf '{"ServerURL":"%s","Username":"`+user+`","Secret":"`+pass+`"}\n' "$server"; exit 0;; esac
echo "credentials not found in native keychain"; exit 1
`), 0o755))

	var reg *privateRegistry
	var install, digest string
	for _, c := range []struct {
		auth, creds string
		https       bool
	}{{"basic", "docker login", false}, {"token", "credential helper", true}} {
		dir := filepath.Join(work, c.auth)
		reg = startPrivateRegistry(t, dir, user+":"+pass, c.auth == "token", c.https)
		host := reg.host
		clientEnv := append(append([]string{}, helmEnv...), reg.env...)
		config := `{"auths":{"` + host + `":{"auth":"` + base64.StdEncoding.EncodeToString([]byte(user+":"+pass)) + `"}}}`
		if c.creds == "credential helper" {
			config = `{"credHelpers":{"` + host + `":"watchdog-test"}}`
		}
		// A wrong password first: make push fails saying how to log in, pushes
		// nothing and prints no password.
		wrong := filepath.Join(dir, "wrong")
		must(t, os.MkdirAll(wrong, 0o700))
		must(t, os.WriteFile(filepath.Join(wrong, "config.json"), []byte(`{"auths":{"`+host+`":{"auth":"`+base64.StdEncoding.EncodeToString([]byte(user+":wrong-"+pass))+`"}}}`), 0o600))
		out, err := makePush(host+"/platform", reg.insecure, append(clientEnv, "DOCKER_CONFIG="+wrong))
		if err == nil || !strings.Contains(out, "docker login "+host) || strings.Contains(out, pass) {
			t.Errorf("%s auth, a wrong password: make push %v, want a failure saying `docker login %s`, no password:\n%s", c.auth, err, host, out)
		}
		repo, err := name.NewRepository(host+"/platform/scheduler-watchdog", reg.nameOpts...)
		must(t, err)
		if tags, err := remote.List(repo, append(reg.remote, remote.WithAuth(&authn.Basic{Username: user, Password: pass}))...); err == nil && len(tags) > 0 {
			t.Errorf("%s auth, a wrong password: tags %v pushed", c.auth, tags)
		}
		must(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte(config), 0o600))
		install, digest = pushAndCheck(t, reg, user, pass, c.auth+" auth, credentials by "+c.creds,
			append(clientEnv, "DOCKER_CONFIG="+dir, "PATH="+helper+":"+os.Getenv("PATH")))
	}

	// The last install line, run as printed onto a fresh API server.
	env, err := testenv.Start()
	must(t, err)
	t.Cleanup(func() { _ = env.Stop() })
	helmEnv = append(append(helmEnv, reg.env...), "DOCKER_CONFIG="+filepath.Join(work, "no-docker-config"), "KUBECONFIG="+env.Kubeconfig)
	helmIn(t, helmEnv, strings.NewReader(pass), "registry", "login", reg.host, "--username", user, "--password-stdin")
	helmIn(t, helmEnv, nil, strings.Fields(install)[1:]...)

	ctx, cancel := testenv.Ctx()
	defer cancel()
	pinned := reg.host + "/platform/scheduler-watchdog@" + digest
	jobs, err := env.Client.BatchV1().CronJobs("agentenv-system").List(ctx, metav1.ListOptions{})
	must(t, err)
	if len(jobs.Items) != 1 {
		t.Fatalf("%d CronJobs installed, want 1", len(jobs.Items))
	}
	for _, c := range jobs.Items[0].Spec.JobTemplate.Spec.Template.Spec.Containers {
		if c.Image != pinned {
			t.Errorf("CronJob container %s runs %q, want the pushed index %q", c.Name, c.Image, pinned)
		}
	}
	if hooks := helmIn(t, helmEnv, nil, "get", "hooks", "watchdog", "-n", "agentenv-system"); !strings.Contains(hooks, `image: "`+pinned+`"`) {
		t.Errorf("the helm test hook does not run %s:\n%s", pinned, hooks)
	}
	if status := helmIn(t, helmEnv, nil, "status", "watchdog", "-n", "agentenv-system"); !strings.Contains(status, "STATUS: deployed") {
		t.Errorf("helm status:\n%s", status)
	}
}

// pushAndCheck runs `make push` to host/platform, which wants user and pass, with
// env (where the credentials are); checks that nothing is taken or given without
// them and that the printed digests are what the registry holds; returns the
// printed helm install line, checked word for word, and the image's digest.
func pushAndCheck(t *testing.T, reg *privateRegistry, user, pass, how string, env []string) (string, string) {
	t.Helper()
	host := reg.host
	repo, err := name.NewRepository(host+"/platform/scheduler-watchdog", reg.nameOpts...)
	must(t, err)
	chartPath, chart := packagedChart(t)
	const chartName = "agentenv-scheduler-watchdog"
	chartRef, err := name.NewTag(host+"/platform/charts/"+chartName+":"+chart.Version, reg.nameOpts...)
	must(t, err)
	local := imageIndex(t)
	if err := remote.WriteIndex(repo.Tag("anonymous"), local, reg.remote...); !unauthorized(err) {
		t.Fatalf("%s: an anonymous push: %v, want 401 Unauthorized", how, err)
	}

	out, err := makePush(host+"/platform", reg.insecure, env)
	if err != nil {
		t.Fatalf("make push REGISTRY=%s/platform (%s): %v\n%s", host, how, err, out)
	}
	t.Logf("make push, %s:\n%s", how, out)
	if strings.Contains(out, pass) || strings.Contains(out, base64.StdEncoding.EncodeToString([]byte(user+":"+pass))) {
		t.Errorf("make push (%s) printed the password", how)
	}
	_, printed, ok := strings.Cut(out, "\nimage:  ")
	if !ok {
		t.Fatalf("make push (%s) printed no digests", how)
	}
	// Not the release's base: said loudly first, and again beside the digests.
	if !strings.Contains(out, "make push: WARNING: IMAGE_BASE=local") ||
		!strings.Contains(printed, "\nbase:   local: THIS MACHINE'S CA BUNDLE AND PASSWD, NOT THE RELEASE'S BASE") {
		t.Errorf("make push IMAGE_BASE=local (%s) does not warn, first and beside the digests, that the base is not the release's:\n%s", how, out)
	}
	field := func(re string) string {
		t.Helper()
		m := regexp.MustCompile(re).FindStringSubmatch(printed)
		if m == nil {
			t.Fatalf("make push (%s) printed no line matching %s:\n%s", how, re, printed)
		}
		return m[1]
	}
	authed := append(reg.remote, remote.WithAuth(&authn.Basic{Username: user, Password: pass}))
	const sha = `(sha256:[0-9a-f]{64})`
	tag := field(`^` + regexp.QuoteMeta(repo.String()) + `:(\S+)\n`)
	printedDigest := field(`(?m)^ +` + regexp.QuoteMeta(repo.String()) + `@` + sha + `$`)
	digest, err := v1.NewHash(printedDigest)
	must(t, err)
	desc, err := remote.Get(repo.Tag(tag), authed...)
	must(t, err)
	if desc.Digest != digest || !desc.MediaType.IsIndex() {
		t.Fatalf("the registry serves %s (%s) under the printed tag %s, want the printed index %s", desc.Digest, desc.MediaType, tag, digest)
	}
	served, err := desc.ImageIndex()
	must(t, err)
	// ko built it again: the same image as dist/image, platform by platform (the
	// same config and layers; only the annotation naming the base's address, a
	// registry on loopback of its own, differs).
	wantImage := map[string]v1.Image{"amd64": platformImage(t, local, "amd64"), "arm64": platformImage(t, local, "arm64")}
	im, err := served.IndexManifest()
	must(t, err)
	var platforms []string
	for _, d := range im.Manifests {
		if d.Platform == nil {
			t.Fatalf("index entry %s has no platform", d.Digest)
		}
		platforms = append(platforms, d.Platform.String())
		pushed, err := remote.Image(repo.Digest(d.Digest.String()), authed...)
		if err != nil {
			t.Errorf("the %s image %s is not in the registry: %v", d.Platform, d.Digest, err)
			continue
		}
		if w := wantImage[d.Platform.Architecture]; w != nil && !sameImage(t, pushed, w) {
			t.Errorf("the pushed %s image is not the one dist/image holds", d.Platform)
		}
		sbomTag := "sha256-" + d.Digest.Hex + ".sbom"
		if _, err := remote.Head(repo.Tag(sbomTag), authed...); err != nil {
			t.Errorf("no SBOM of the %s image (%s): %v", d.Platform, sbomTag, err)
		}
	}
	if strings.Join(platforms, " ") != "linux/amd64 linux/arm64" {
		t.Errorf("the pushed index holds %v, want linux/amd64 and linux/arm64", platforms)
	}

	// The SBOM of the index, where cosign's `download sbom` looks for it.
	sbomRef := field(`(?m)^sbom: +(\S+) `)
	if want := repo.String() + ":sha256-" + digest.Hex + ".sbom"; sbomRef != want {
		t.Fatalf("make push printed the SBOM %s, want %s", sbomRef, want)
	}
	sbomTag, err := name.NewTag(sbomRef, reg.nameOpts...)
	must(t, err)
	sbom, err := remote.Image(sbomTag, authed...)
	must(t, err)
	sl, err := sbom.Layers()
	must(t, err)
	if len(sl) != 1 {
		t.Fatalf("the SBOM artifact has %d layers, want 1", len(sl))
	}
	if mt, err := sl[0].MediaType(); err != nil || mt != "text/spdx+json" {
		t.Errorf("the SBOM's media type %q, %v; want SPDX JSON", mt, err)
	}

	chartDigest := field(`(?m)^chart: +oci://` + regexp.QuoteMeta(chartRef.String()) + `\n +` + sha + `$`)
	cd, err := remote.Get(chartRef, authed...)
	must(t, err)
	if cd.Digest.String() != chartDigest {
		t.Errorf("the registry serves the chart %s, make push printed %s", cd.Digest, chartDigest)
	}
	cm, err := remote.Image(chartRef, authed...)
	must(t, err)
	if m, err := cm.Manifest(); err != nil || len(m.Layers) != 1 || m.Layers[0].Digest.Hex != fileSHA256(t, chartPath) {
		t.Errorf("the chart artifact's layers: %+v, %v; want the one package %s", m, err, chartPath)
	}

	// Nobody without the password pulls either.
	if _, err := remote.Get(repo.Digest(digest.String()), reg.remote...); !unauthorized(err) {
		t.Errorf("%s: an anonymous pull of the image: %v, want 401 Unauthorized", how, err)
	}
	if _, err := remote.Head(chartRef, reg.remote...); !unauthorized(err) {
		t.Errorf("%s: an anonymous pull of the chart: %v, want 401 Unauthorized", how, err)
	}

	install := field(`(?m)^  (helm install .*)$`)
	plain := ""
	if reg.insecure {
		plain = " --plain-http"
	}
	want := "helm install watchdog oci://" + host + "/platform/charts/" + chartName + " --version " + chart.Version + plain + " -n agentenv-system --create-namespace" +
		" --set image.repository=" + repo.String() + " --set image.digest=" + digest.String()
	if install != want {
		t.Fatalf("make push printed\n  %s\nwant\n  %s", install, want)
	}
	return install, digest.String()
}

// sameImage: the same config and layers.
func sameImage(t *testing.T, a, b v1.Image) bool {
	t.Helper()
	ma, err := a.Manifest()
	must(t, err)
	mb, err := b.Manifest()
	must(t, err)
	if ma.Config.Digest != mb.Config.Digest || len(ma.Layers) != len(mb.Layers) {
		return false
	}
	for i := range ma.Layers {
		if ma.Layers[i].Digest != mb.Layers[i].Digest {
			return false
		}
	}
	return true
}

// privateRegistry is a `release registry` on loopback that wants a password.
type privateRegistry struct {
	host string
	// insecure: plain http (make push INSECURE=1, helm --plain-http).
	insecure bool
	// env makes a client trust its certificate (https: SSL_CERT_FILE, the CA);
	// remote and nameOpts do the same for this test's own requests.
	env      []string
	remote   []remote.Option
	nameOpts []name.Option
}

// startPrivateRegistry runs `release registry` on loopback with basic auth, or
// token auth, over plain http or https with a CA of its own.
func startPrivateRegistry(t *testing.T, dir, userPass string, token, https bool) *privateRegistry {
	t.Helper()
	must(t, os.MkdirAll(dir, 0o700))
	authFile, addrFile := filepath.Join(dir, "auth"), filepath.Join(dir, "addr")
	must(t, os.WriteFile(authFile, []byte(userPass), 0o600))
	args := []string{"registry", "--addr", "127.0.0.1:0", "--addr-file", addrFile, "--basic-auth-file", authFile}
	if token {
		args = append(args, "--token")
	}
	reg := &privateRegistry{insecure: !https}
	if https {
		caPEM, certPEM, keyPEM, err := testenv.TestCA("watchdog test registry", net.IPv4(127, 0, 0, 1))
		must(t, err)
		for f, b := range map[string][]byte{"ca.pem": caPEM, "cert.pem": certPEM, "key.pem": keyPEM} {
			must(t, os.WriteFile(filepath.Join(dir, f), b, 0o600))
		}
		args = append(args, "--tls-cert", filepath.Join(dir, "cert.pem"), "--tls-key", filepath.Join(dir, "key.pem"))
		// SSL_CERT_FILE replaces the system's roots: only this CA is trusted.
		reg.env = []string{"SSL_CERT_FILE=" + filepath.Join(dir, "ca.pem")}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(caPEM)
		tr := remote.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		reg.remote = []remote.Option{remote.WithTransport(tr)}
	} else {
		reg.nameOpts = []name.Option{name.Insecure}
	}
	cmd := exec.Command(releaseBin, args...)
	// Killed with the test binary, even when a timeout panic skips the cleanup.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out testenv.SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	must(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); <-exited })
	// A readiness wait, not a timed assertion: the bound only stops a hung start.
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		select {
		case <-exited:
			t.Fatalf("release registry exited:\n%s", out.String())
		default:
		}
		if b, err := os.ReadFile(addrFile); err == nil {
			reg.host = string(b)
			return reg
		}
	}
	t.Fatalf("release registry did not start in a minute:\n%s", out.String())
	return nil
}

// makePush runs the real `make push` for the artifacts `make release-check`
// built (-o: not built again), with env added to a make-free environment.
func makePush(registry string, insecure bool, env []string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// IMAGE_BASE=local: offline, on dist/image's base (make push's own is the
	// release's, from gcr.io: test/build checks that).
	args := []string{"-o", "image", "-o", "chart-package", "push", "REGISTRY=" + registry, "DIST=" + dist, "VERSION=" + version, "COMMIT=" + commit, "IMAGE_BASE=local"}
	if insecure {
		args = append(args, "INSECURE=1")
	}
	cmd := exec.CommandContext(ctx, "make", args...)
	cmd.Dir = root
	for _, kv := range os.Environ() {
		// The outer make's flags and jobserver are not this make's.
		if k, _, _ := strings.Cut(kv, "="); k != "MAKEFLAGS" && k != "MFLAGS" && k != "MAKELEVEL" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func unauthorized(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) && te.StatusCode == http.StatusUnauthorized
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
