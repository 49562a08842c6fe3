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
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

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
	cf.Config.User = "65532:65532" // nonroot, as the release image
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

// baseCommand pushes the local base for each platform, as one index, and prints
// REF@DIGEST: what ko builds on where no registry but this one can be reached.
func baseCommand(args []string) error {
	fs := flag.NewFlagSet("base", flag.ContinueOnError)
	refFlag := fs.String("ref", "", "where to push: REGISTRY/REPOSITORY:TAG")
	platforms := fs.String("platforms", "linux/amd64,linux/arm64", "comma-separated platforms")
	caBundle := fs.String("ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "the CA bundle of the base")
	insecure := fs.Bool("insecure", false, "plain HTTP (a registry on loopback)")
	timeout := fs.Duration("timeout", 2*time.Minute, "deadline of the push")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *refFlag == "" {
		return errors.New("base: --ref is required")
	}
	ref, err := tagRef(*refFlag, *insecure)
	if err != nil {
		return err
	}
	at := time.Unix(0, 0).UTC()
	var adds []mutate.IndexAddendum
	for _, s := range strings.Split(*platforms, ",") {
		p, err := v1.ParsePlatform(s)
		if err != nil {
			return err
		}
		img, err := localBase(*p, *caBundle, at)
		if err != nil {
			return err
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: p}})
	}
	idx := mutate.IndexMediaType(mutate.AppendManifests(empty.Index, adds...), types.OCIImageIndex)
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := remote.WriteIndex(ref, idx, remote.WithContext(ctx)); err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s@%s\n", ref.Context(), d)
	return nil
}

// tagRef parses --ref (REGISTRY/REPOSITORY:TAG); insecure allows plain HTTP.
func tagRef(ref string, insecure bool) (name.Tag, error) {
	var opts []name.Option
	if insecure {
		opts = append(opts, name.Insecure)
	}
	t, err := name.NewTag(ref, opts...)
	if err != nil {
		return t, fmt.Errorf("--ref: %w", err)
	}
	return t, nil
}
