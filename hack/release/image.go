package main

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's contract, which the Dockerfile states too (test/release compares them).
const (
	binaryPath = "/watchdog"
	user       = "65532:65532"
)

// watchdogEntry is the watchdog image's binary and command.
var watchdogEntry = entry{path: binaryPath, cmd: []string{"check"}}

// entry is where an image's one binary goes and what it runs: the binary is the
// entrypoint, cmd its default arguments.
type entry struct {
	path string
	cmd  []string
}

// multiFlag collects a repeated flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func imageCommand(args []string) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	out := fs.String("out", "dist/image", "OCI image layout to write (replaced)")
	var binaries multiFlag
	fs.Var(&binaries, "binary", "PLATFORM=PATH of a static watchdog binary, e.g. linux/amd64=dist/bin/linux_amd64/watchdog (repeat)")
	base := fs.String("base", "local", "local (a base assembled here: CA bundle, passwd with uid 65532) or an image reference pinned by digest (name@sha256:...), read from its registry")
	caBundle := fs.String("ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "the CA bundle of the local base")
	version := fs.String("version", "", "org.opencontainers.image.version")
	revision := fs.String("revision", "", "org.opencontainers.image.revision")
	source := fs.String("source", "https://github.com/agentenv/watchdog", "org.opencontainers.image.source")
	created := fs.String("created", "", "creation time, RFC 3339 (the commit's time: the same inputs give the same digest)")
	timeout := fs.Duration("timeout", 5*time.Minute, "deadline of reading a release base from its registry")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(binaries) == 0 || *version == "" || *revision == "" || *created == "" {
		return errors.New("image: --binary, --version, --revision and --created are required")
	}
	at, err := time.Parse(time.RFC3339, *created)
	if err != nil {
		return fmt.Errorf("--created: %w", err)
	}
	labels := map[string]string{
		"org.opencontainers.image.source":      *source,
		"org.opencontainers.image.version":     *version,
		"org.opencontainers.image.revision":    *revision,
		"org.opencontainers.image.licenses":    "MIT",
		"org.opencontainers.image.title":       "agentenv-scheduler-watchdog",
		"org.opencontainers.image.description": "Detects a wedged AgentENV scheduler and restarts it safely",
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	var adds []mutate.IndexAddendum
	for _, b := range binaries {
		platform, path, ok := strings.Cut(b, "=")
		if !ok {
			return fmt.Errorf("--binary %q: want PLATFORM=PATH", b)
		}
		p, err := v1.ParsePlatform(platform)
		if err != nil {
			return fmt.Errorf("--binary %q: %w", b, err)
		}
		baseImage, err := baseFor(ctx, *base, *p, *caBundle, at)
		if err != nil {
			return err
		}
		img, err := withBinary(baseImage, *p, path, watchdogEntry, labels, at)
		if err != nil {
			return fmt.Errorf("%s: %w", platform, err)
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: p}})
	}
	idx := mutate.IndexMediaType(mutate.AppendManifests(empty.Index, adds...), types.OCIImageIndex)
	idx = mutate.Annotations(idx, map[string]string{
		"org.opencontainers.image.source":   *source,
		"org.opencontainers.image.version":  *version,
		"org.opencontainers.image.revision": *revision,
		"org.opencontainers.image.created":  at.UTC().Format(time.RFC3339),
	}).(v1.ImageIndex)
	if err := os.RemoveAll(*out); err != nil {
		return err
	}
	lp, err := layout.Write(*out, empty.Index)
	if err != nil {
		return fmt.Errorf("write layout %s: %w", *out, err)
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": *version})); err != nil {
		return fmt.Errorf("write layout %s: %w", *out, err)
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s: image index %s (%d platforms)\n", *out, d, len(adds))
	return nil
}

// baseFor is the base of one platform: assembled here, or the platform's image of
// a multi-arch base pinned by digest.
func baseFor(ctx context.Context, base string, p v1.Platform, caBundle string, at time.Time) (v1.Image, error) {
	if base == "local" {
		return localBase(p, caBundle, at)
	}
	ref, err := name.NewDigest(base)
	if err != nil {
		return nil, fmt.Errorf("--base %q: a release base is pinned by digest (name@sha256:...): %w", base, err)
	}
	img, err := remote.Image(ref, remote.WithPlatform(p), remote.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("--base %s for %s: %w", ref, p, err)
	}
	return img, nil
}

// localBase stands in for distroless/static where no registry can be reached: the
// files a static Go binary needs (CA certificates for TLS, a passwd entry for its
// uid) and nothing else: no shell, no package manager.
func localBase(p v1.Platform, caBundle string, at time.Time) (v1.Image, error) {
	ca, err := os.ReadFile(caBundle)
	if err != nil {
		return nil, fmt.Errorf("local base: CA bundle: %w", err)
	}
	layer, err := tarLayer(at, []file{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n")},
		{name: "etc/nsswitch.conf", mode: 0o644, data: []byte("hosts: files dns\n")},
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "etc/ssl/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: ca},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/nonroot/", mode: 0o700, dir: true, uid: 65532},
		{name: "tmp/", mode: 0o1777, dir: true},
	})
	if err != nil {
		return nil, err
	}
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{Layer: layer,
		History: v1.History{CreatedBy: "local base: CA bundle, passwd (uid 65532), /tmp", Created: v1.Time{Time: at}}})
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	cf.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}
	return mutate.ConfigFile(img, cf)
}

// withBinary adds the binary as the image's one application layer, at e.path, and
// sets the entrypoint, user and labels.
func withBinary(base v1.Image, p v1.Platform, path string, e entry, labels map[string]string, at time.Time) (v1.Image, error) {
	bin, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	layer, err := tarLayer(at, []file{{name: strings.TrimPrefix(e.path, "/"), mode: 0o755, data: bin}})
	if err != nil {
		return nil, err
	}
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer,
		History: v1.History{CreatedBy: strings.TrimPrefix(e.path, "/") + " " + labels["org.opencontainers.image.version"], Created: v1.Time{Time: at}}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	cf.Created = v1.Time{Time: at}
	cf.Config.User = user
	cf.Config.Entrypoint = []string{e.path}
	cf.Config.Cmd = e.cmd
	cf.Config.WorkingDir = "/"
	if cf.Config.Labels == nil {
		cf.Config.Labels = map[string]string{}
	}
	for k, v := range labels {
		cf.Config.Labels[k] = v
	}
	return mutate.ConfigFile(img, cf)
}

type file struct {
	name string
	mode int64
	data []byte
	dir  bool
	uid  int
}

// tarLayer is a reproducible gzip layer: sorted entries, one time, numeric owners.
func tarLayer(at time.Time, files []file) (v1.Layer, error) {
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, ModTime: at.UTC(), Uid: f.uid, Gid: f.uid, Format: tar.FormatPAX}
		if f.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	raw := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil },
		tarball.WithMediaType(types.OCILayer))
}

// layoutIndex is the multi-arch index a layout written by image holds.
func layoutIndex(dir string) (v1.ImageIndex, error) {
	lp, err := layout.FromPath(filepath.Clean(dir))
	if err != nil {
		return nil, fmt.Errorf("read layout %s: %w", dir, err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		return nil, err
	}
	m, err := top.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 || !m.Manifests[0].MediaType.IsIndex() {
		return nil, fmt.Errorf("layout %s: want one image index in index.json, found %d entries", dir, len(m.Manifests))
	}
	return top.ImageIndex(m.Manifests[0].Digest)
}
