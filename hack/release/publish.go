package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"go.yaml.in/yaml/v3"
)

// The repositories `make push` writes under REGISTRY, as the public release
// lays them out under ghcr.io/agentenv.
const (
	imageRepo = "scheduler-watchdog"
	chartRepo = "charts"
	// sbomType is the SBOM artifact's type (OCI 1.1 artifactType): CycloneDX JSON.
	sbomType = "application/vnd.cyclonedx+json"
	// emptyConfig is the OCI empty descriptor's media type (an artifact's config).
	emptyConfig = "application/vnd.oci.empty.v1+json"
)

// publishCommand pushes a release to any OCI registry with the user's own
// credentials: the image index (go-containerregistry, authn.DefaultKeychain: the
// Docker config and its credential helpers), the SBOMs as an OCI artifact whose
// subject is that index (found with the referrers API, or its tag fallback), and
// the chart with `helm push` (helm's registry login, else the Docker config).
// It prints the digests and the helm install line that pins the pushed image.
func publishCommand(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("publish", flag.ContinueOnError)
	registry := fs.String("registry", "", "REGISTRY[/PATH] to push to, e.g. registry.corp.example/platform")
	dir := fs.String("layout", "dist/image", "OCI image layout written by `release image`")
	sbomDir := fs.String("sbom-dir", "dist/sbom", "directory of the CycloneDX SBOMs (*.cdx.json) `make image` wrote")
	chartPath := fs.String("chart", "", "the packaged chart (make chart-package)")
	tag := fs.String("tag", "", "image tag (default: the chart's appVersion)")
	helmBin := fs.String("helm", "helm", "helm binary")
	insecure := fs.Bool("insecure", false, "plain HTTP (a registry on loopback)")
	timeout := fs.Duration("timeout", 10*time.Minute, "deadline of the whole push")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *registry == "" || *chartPath == "" {
		return errors.New("publish: --registry and --chart are required (make push REGISTRY=registry.corp.example/platform)")
	}
	*registry = strings.TrimSuffix(strings.TrimPrefix(*registry, "oci://"), "/")
	chart, err := chartMetadata(*chartPath)
	if err != nil {
		return fmt.Errorf("--chart %s: %w", *chartPath, err)
	}
	if *tag == "" {
		*tag = chart.AppVersion
	}
	var opts []name.Option
	if *insecure {
		opts = append(opts, name.Insecure)
	}
	repo, err := name.NewRepository(*registry+"/"+imageRepo, opts...)
	if err != nil {
		return fmt.Errorf("--registry %s: %w", *registry, err)
	}
	ref := repo.Tag(imageTag(*tag))
	idx, err := layoutIndex(*dir)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	ropts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	if err := remote.WriteIndex(ref, idx, ropts...); err != nil {
		return fmt.Errorf("push the image to %s: %w%s", ref, err, loginHint(err, repo.RegistryStr()))
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	raw, err := idx.RawManifest()
	if err != nil {
		return err
	}
	mt, err := idx.MediaType()
	if err != nil {
		return err
	}
	sbom, err := pushSBOMs(ctx, repo, v1.Descriptor{MediaType: mt, Digest: digest, Size: int64(len(raw))}, *sbomDir, ropts)
	if err != nil {
		return fmt.Errorf("image %s@%s pushed; its SBOM: %w%s", repo, digest, err, loginHint(err, repo.RegistryStr()))
	}
	chartDigest, err := helmPush(ctx, *helmBin, *chartPath, "oci://"+*registry+"/"+chartRepo, *insecure)
	if err != nil {
		return fmt.Errorf("image %s@%s and its SBOM pushed; the chart: %w", repo, digest, err)
	}
	plain := ""
	if *insecure {
		plain = " --plain-http"
	}
	fmt.Fprintf(stdout, "image:  %s:%s\n        %s@%s\n", repo, ref.TagStr(), repo, digest)
	fmt.Fprintf(stdout, "sbom:   %s@%s (artifact %s, subject the image)\n", repo, sbom, sbomType)
	fmt.Fprintf(stdout, "chart:  oci://%s/%s/%s:%s\n        %s\n", *registry, chartRepo, chart.Name, chart.Version, chartDigest)
	// --create-namespace: the line works as printed on a cluster that has no
	// agentenv-system yet, as a first install from a mirror usually is.
	fmt.Fprintf(stdout, "install:\n  helm install watchdog oci://%s/%s/%s --version %s%s -n agentenv-system --create-namespace --set image.repository=%s --set image.digest=%s\n",
		*registry, chartRepo, chart.Name, chart.Version, plain, repo, digest)
	return nil
}

// imageTag maps a version (git describe's v0.1.0-3-gabc-dirty) to a tag: no
// leading v, and only the characters a tag may hold.
func imageTag(version string) string {
	t := regexp.MustCompile(`[^A-Za-z0-9_.-]`).ReplaceAllString(strings.TrimPrefix(version, "v"), "-")
	if t == "" {
		return "dev"
	}
	return t
}

// pushSBOMs pushes the SBOMs as one OCI artifact (a layer per SBOM, named by
// its file) whose subject is the image index, and returns its digest.
func pushSBOMs(ctx context.Context, repo name.Repository, subject v1.Descriptor, dir string, ropts []remote.Option) (v1.Hash, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.cdx.json"))
	if err != nil || len(files) == 0 {
		return v1.Hash{}, fmt.Errorf("no SBOM (*.cdx.json) in --sbom-dir %s: run make image", dir)
	}
	sort.Strings(files)
	config := static.NewLayer([]byte("{}"), emptyConfig)
	if err := remote.WriteLayer(repo, config, ropts...); err != nil {
		return v1.Hash{}, err
	}
	m := v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1, ArtifactType: sbomType, Subject: &subject}
	if m.Config, err = descriptor(config, nil); err != nil {
		return v1.Hash{}, err
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return v1.Hash{}, err
		}
		l := static.NewLayer(b, sbomType)
		if err := remote.WriteLayer(repo, l, ropts...); err != nil {
			return v1.Hash{}, err
		}
		d, err := descriptor(l, map[string]string{"org.opencontainers.image.title": filepath.Base(f)})
		if err != nil {
			return v1.Hash{}, err
		}
		m.Layers = append(m.Layers, d)
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return v1.Hash{}, err
	}
	h, _, err := v1.SHA256(bytes.NewReader(raw))
	if err != nil {
		return v1.Hash{}, err
	}
	if err := remote.Put(repo.Digest(h.String()), rawManifest{raw: raw, mt: types.OCIManifestSchema1}, ropts...); err != nil {
		return v1.Hash{}, err
	}
	return h, nil
}

func descriptor(l v1.Layer, annotations map[string]string) (v1.Descriptor, error) {
	d, err := l.Digest()
	if err != nil {
		return v1.Descriptor{}, err
	}
	size, err := l.Size()
	if err != nil {
		return v1.Descriptor{}, err
	}
	mt, err := l.MediaType()
	if err != nil {
		return v1.Descriptor{}, err
	}
	return v1.Descriptor{MediaType: mt, Digest: d, Size: size, Annotations: annotations}, nil
}

type rawManifest struct {
	raw []byte
	mt  types.MediaType
}

func (r rawManifest) RawManifest() ([]byte, error)        { return r.raw, nil }
func (r rawManifest) MediaType() (types.MediaType, error) { return r.mt, nil }

// loginHint says how to give the registry credentials when it refused them.
func loginHint(err error, registry string) string {
	var te *transport.Error
	if !errors.As(err, &te) || (te.StatusCode != http.StatusUnauthorized && te.StatusCode != http.StatusForbidden) {
		return ""
	}
	return fmt.Sprintf(" (the registry refused the credentials or found none: `docker login %s`, or a credential helper in $DOCKER_CONFIG/config.json, gives them)", registry)
}

// helmPush pushes the chart with helm, whose registry client reads helm's own
// registry login and then the Docker config, and returns the digest it prints.
func helmPush(ctx context.Context, helm, chart, dest string, insecure bool) (string, error) {
	args := []string{"push", chart, dest}
	if insecure {
		args = append(args, "--plain-http")
	}
	out, err := exec.CommandContext(ctx, helm, args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("helm %s: %w: %s (credentials: `helm registry login %s`, or `docker login`)",
			strings.Join(args, " "), err, strings.TrimSpace(string(out)), strings.SplitN(strings.TrimPrefix(dest, "oci://"), "/", 2)[0])
	}
	d := regexp.MustCompile(`(?m)^Digest: (sha256:[0-9a-f]{64})`).FindSubmatch(out)
	if d == nil {
		return "", fmt.Errorf("helm %s printed no digest:\n%s", strings.Join(args, " "), out)
	}
	return string(d[1]), nil
}

type chartMeta struct {
	Name       string `yaml:"name"`
	Version    string `yaml:"version"`
	AppVersion string `yaml:"appVersion"`
}

// chartMetadata reads <name>/Chart.yaml from a packaged chart.
func chartMetadata(path string) (chartMeta, error) {
	var m chartMeta
	f, err := os.Open(path)
	if err != nil {
		return m, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return m, err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err != nil {
			return m, fmt.Errorf("no Chart.yaml in the package: %w", err)
		}
		if dir, file := filepath.Split(h.Name); file == "Chart.yaml" && strings.Count(dir, "/") == 1 {
			b, err := io.ReadAll(io.LimitReader(tr, 1<<20))
			if err != nil {
				return m, err
			}
			if err := yaml.Unmarshal(b, &m); err != nil {
				return m, fmt.Errorf("%s: %w", h.Name, err)
			}
			if m.Name == "" || m.Version == "" {
				return m, fmt.Errorf("%s: no name or version", h.Name)
			}
			return m, nil
		}
	}
}
