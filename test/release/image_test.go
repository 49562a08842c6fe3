//go:build release

package release

import (
	"archive/tar"
	"bufio"
	"debug/buildinfo"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// imageIndex is the multi-arch index dist/image holds (index.json names it).
func imageIndex(t *testing.T) v1.ImageIndex {
	t.Helper()
	lp, err := layout.FromPath(filepath.Join(dist, "image"))
	must(t, err)
	top, err := lp.ImageIndex()
	must(t, err)
	m, err := top.IndexManifest()
	must(t, err)
	if len(m.Manifests) != 1 || m.Manifests[0].MediaType != types.OCIImageIndex {
		t.Fatalf("dist/image/index.json: want one OCI image index, got %+v", m.Manifests)
	}
	idx, err := top.ImageIndex(m.Manifests[0].Digest)
	must(t, err)
	return idx
}

func platformImage(t *testing.T, idx v1.ImageIndex, arch string) v1.Image {
	t.Helper()
	m, err := idx.IndexManifest()
	must(t, err)
	for _, d := range m.Manifests {
		if d.Platform != nil && d.Platform.OS == "linux" && d.Platform.Architecture == arch {
			img, err := idx.Image(d.Digest)
			must(t, err)
			return img
		}
	}
	t.Fatalf("no linux/%s image in the index", arch)
	return nil
}

// TestImageIndexListsBothPlatforms: exactly linux/amd64 and linux/arm64, OCI media
// types, and each image's config says its own platform.
func TestImageIndexListsBothPlatforms(t *testing.T) {
	idx := imageIndex(t)
	m, err := idx.IndexManifest()
	must(t, err)
	var platforms []string
	for _, d := range m.Manifests {
		if d.MediaType != types.OCIManifestSchema1 || d.Platform == nil {
			t.Errorf("index entry %s: media type %s, platform %v", d.Digest, d.MediaType, d.Platform)
			continue
		}
		platforms = append(platforms, d.Platform.OS+"/"+d.Platform.Architecture)
		img, err := idx.Image(d.Digest)
		must(t, err)
		cf, err := img.ConfigFile()
		must(t, err)
		if cf.OS != d.Platform.OS || cf.Architecture != d.Platform.Architecture {
			t.Errorf("%s: config says %s/%s", d.Platform, cf.OS, cf.Architecture)
		}
	}
	slices.Sort(platforms)
	if want := []string{"linux/amd64", "linux/arm64"}; !slices.Equal(platforms, want) {
		t.Errorf("index platforms %v, want %v", platforms, want)
	}
}

// TestImageConfig: the amd64 image runs the binary as its entrypoint (where ko
// puts it), as uid 65532, and carries the OCI labels of this build.
func TestImageConfig(t *testing.T) {
	cf, err := platformImage(t, imageIndex(t), "amd64").ConfigFile()
	must(t, err)
	c := cf.Config
	if c.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532", c.User)
	}
	if !slices.Equal(c.Entrypoint, []string{"/ko-app/watchdog"}) || len(c.Cmd) != 0 {
		t.Errorf("entrypoint %q cmd %q, want [/ko-app/watchdog] and no cmd", c.Entrypoint, c.Cmd)
	}
	for k, want := range map[string]string{
		"org.opencontainers.image.source":   "https://github.com/agentenv/watchdog",
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.revision": commit,
		"org.opencontainers.image.licenses": "MIT",
	} {
		if got := c.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
}

// rootfs unpacks the image's layers (whiteouts applied) into a directory.
func rootfs(t *testing.T, img v1.Image) string {
	t.Helper()
	dir := t.TempDir()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		must(t, err)
		path := filepath.Join(dir, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			must(t, os.MkdirAll(path, 0o755))
		case tar.TypeReg:
			must(t, os.MkdirAll(filepath.Dir(path), 0o755))
			f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o777|0o200)
			must(t, err)
			_, err = io.Copy(f, tr)
			must(t, err)
			must(t, f.Close())
		default:
			// Links: a shell is often a symlink to busybox; record the name.
			must(t, os.MkdirAll(filepath.Dir(path), 0o755))
			must(t, os.WriteFile(path, []byte("link to "+h.Linkname), 0o644))
		}
	}
	return dir
}

// TestImageHasNoShellAndRunsItsBinary: the amd64 layers, unpacked, hold no shell
// (nor busybox, nor a package manager), and their /ko-app/watchdog prints this version.
func TestImageHasNoShellAndRunsItsBinary(t *testing.T) {
	dir := rootfs(t, platformImage(t, imageIndex(t), "amd64"))
	shells := regexp.MustCompile(`^(sh|bash|ash|dash|zsh|busybox|apt|apt-get|dpkg|apk)$`)
	var files []string
	must(t, filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		files = append(files, rel)
		if shells.MatchString(info.Name()) {
			t.Errorf("the image holds %s", rel)
		}
		return nil
	}))
	for _, want := range []string{"ko-app/watchdog", "etc/passwd", "etc/ssl/certs/ca-certificates.crt"} {
		if !slices.Contains(files, want) {
			t.Errorf("the image lacks /%s (files: %v)", want, files)
		}
	}
	passwd, err := os.ReadFile(filepath.Join(dir, "etc/passwd"))
	must(t, err)
	if !regexp.MustCompile(`(?m)^nonroot:x:65532:65532:`).Match(passwd) {
		t.Errorf("/etc/passwd has no nonroot user 65532:\n%s", passwd)
	}
	out, err := exec.Command(filepath.Join(dir, "ko-app", "watchdog"), "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("/ko-app/watchdog --version: %v\n%s", err, out)
	}
	for _, want := range []string{"watchdog " + version, "commit " + commit, "go1."} {
		if !strings.Contains(string(out), want) {
			t.Errorf("/ko-app/watchdog --version printed %q, want %q in it", out, want)
		}
	}
}

// dockerfileFinal is what the Dockerfile's last stage declares: user, entrypoint,
// cmd, and labels with ${VERSION} and ${COMMIT} substituted.
func dockerfileFinal(t *testing.T, vars map[string]string) (user string, entrypoint, cmd []string, labels map[string]string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	must(t, err)
	// Join continuation lines, then keep the instructions after the last FROM.
	text := strings.ReplaceAll(string(raw), "\\\n", " ")
	var final []string
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "FROM ") {
			final = nil
		}
		final = append(final, line)
	}
	labels = map[string]string{}
	labelRe := regexp.MustCompile(`([a-z0-9.]+)="([^"]*)"`)
	expand := func(s string) string { return os.Expand(s, func(k string) string { return vars[k] }) }
	for _, line := range final {
		instr, rest, _ := strings.Cut(line, " ")
		switch instr {
		case "USER":
			user = rest
		case "ENTRYPOINT":
			must(t, json.Unmarshal([]byte(rest), &entrypoint))
		case "CMD":
			must(t, json.Unmarshal([]byte(rest), &cmd))
		case "LABEL":
			for _, m := range labelRe.FindAllStringSubmatch(rest, -1) {
				labels[m[1]] = expand(m[2])
			}
		}
	}
	return user, entrypoint, cmd, labels
}

// TestDockerfileMatchesImage: the Dockerfile (for users with Docker) and `make
// image` declare the same entrypoint, cmd, user and labels.
func TestDockerfileMatchesImage(t *testing.T) {
	cf, err := platformImage(t, imageIndex(t), "amd64").ConfigFile()
	must(t, err)
	user, entrypoint, cmd, labels := dockerfileFinal(t, map[string]string{"VERSION": version, "COMMIT": commit})
	if user != cf.Config.User {
		t.Errorf("Dockerfile USER %q, image %q", user, cf.Config.User)
	}
	if !slices.Equal(entrypoint, cf.Config.Entrypoint) || !slices.Equal(cmd, cf.Config.Cmd) {
		t.Errorf("Dockerfile ENTRYPOINT %q CMD %q, image %q %q", entrypoint, cmd, cf.Config.Entrypoint, cf.Config.Cmd)
	}
	if len(labels) < 4 {
		t.Fatalf("the Dockerfile's final stage has %d OCI labels: %v", len(labels), labels)
	}
	for k, v := range labels {
		if got := cf.Config.Labels[k]; got != v {
			t.Errorf("label %s: Dockerfile %q, image %q", k, v, got)
		}
	}
	for k := range cf.Config.Labels {
		if _, ok := labels[k]; !ok && strings.HasPrefix(k, "org.opencontainers.") {
			t.Errorf("label %s is in the image but not in the Dockerfile", k)
		}
	}
}

// TestSBOM: one SPDX JSON SBOM per image (ko's, from the binary's build
// information), listing every module linked into that platform's binary at the
// version the binary names.
func TestSBOM(t *testing.T) {
	idx := imageIndex(t)
	for _, arch := range []string{"amd64", "arm64"} {
		files, err := filepath.Glob(filepath.Join(dist, "sbom", "*linux-"+arch+"*.spdx.json"))
		must(t, err)
		if len(files) != 1 {
			t.Fatalf("%s: want one SPDX SBOM in dist/sbom, found %v", arch, files)
		}
		raw, err := os.ReadFile(files[0])
		must(t, err)
		var bom struct {
			SPDXVersion string `json:"spdxVersion"`
			Packages    []struct {
				Name, VersionInfo string
			} `json:"packages"`
		}
		must(t, json.Unmarshal(raw, &bom))
		if !strings.HasPrefix(bom.SPDXVersion, "SPDX-") {
			t.Errorf("%s: spdxVersion %q", arch, bom.SPDXVersion)
		}
		inBOM := map[string]string{}
		for _, p := range bom.Packages {
			inBOM[p.Name] = p.VersionInfo
		}
		// The binary the SBOM speaks of is the image's own.
		info, err := buildinfo.ReadFile(filepath.Join(rootfs(t, platformImage(t, idx, arch)), "ko-app", "watchdog"))
		must(t, err)
		if len(info.Deps) < 20 {
			t.Fatalf("%s: only %d modules in the binary's build info", arch, len(info.Deps))
		}
		for _, d := range info.Deps {
			if d.Replace != nil {
				d = d.Replace
			}
			if got, ok := inBOM[d.Path]; !ok || got != d.Version {
				t.Errorf("%s: module %s %s is in the binary, the SBOM says %q", arch, d.Path, d.Version, got)
			}
		}
	}
}
