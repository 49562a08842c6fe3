//go:build release

package release

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestArchives: an archive per OS and architecture, each with the binary, LICENSE
// and README.md; SHA256SUMS names each with its hash; the binary in each is built
// for what the name says, stamped with this version; the linux/amd64 one runs.
func TestArchives(t *testing.T) {
	sums := map[string]string{}
	f, err := os.Open(filepath.Join(dist, "SHA256SUMS"))
	must(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q is not sha256sum's format", sc.Text())
		}
		sums[name] = sum
	}
	v := strings.TrimPrefix(version, "v")
	for _, p := range []struct{ os, arch string }{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}} {
		name := "watchdog_" + v + "_" + p.os + "_" + p.arch + ".tar.gz"
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(dist, name))
			must(t, err)
			h := sha256.Sum256(raw)
			if got := hex.EncodeToString(h[:]); sums[name] != got {
				t.Errorf("SHA256SUMS says %q, the archive hashes to %s", sums[name], got)
			}
			dir := t.TempDir()
			gz, err := gzip.NewReader(strings.NewReader(string(raw)))
			must(t, err)
			tr := tar.NewReader(gz)
			var names []string
			for {
				hd, err := tr.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				must(t, err)
				names = append(names, hd.Name)
				data, err := io.ReadAll(tr)
				must(t, err)
				must(t, os.WriteFile(filepath.Join(dir, filepath.Base(hd.Name)), data, os.FileMode(hd.Mode)))
			}
			slices.Sort(names)
			if want := []string{"LICENSE", "README.md", "watchdog"}; !slices.Equal(names, want) {
				t.Errorf("archive holds %v, want %v", names, want)
			}
			info, err := buildinfo.ReadFile(filepath.Join(dir, "watchdog"))
			must(t, err)
			settings := map[string]string{}
			for _, s := range info.Settings {
				settings[s.Key] = s.Value
			}
			if settings["GOOS"] != p.os || settings["GOARCH"] != p.arch || settings["CGO_ENABLED"] != "0" {
				t.Errorf("binary built for GOOS=%s GOARCH=%s CGO_ENABLED=%s", settings["GOOS"], settings["GOARCH"], settings["CGO_ENABLED"])
			}
			// -trimpath leaves -ldflags out of the build information: the stamped
			// version is a string in the binary.
			bin, err := os.ReadFile(filepath.Join(dir, "watchdog"))
			must(t, err)
			if !bytes.Contains(bin, []byte(version)) || !bytes.Contains(bin, []byte(commit)) {
				t.Errorf("binary not stamped with version %s, commit %s", version, commit)
			}
			if p.os == "linux" && p.arch == "amd64" {
				out, err := exec.Command(filepath.Join(dir, "watchdog"), "--version").CombinedOutput()
				if err != nil || !strings.HasPrefix(string(out), "watchdog "+version+" (commit "+commit) {
					t.Errorf("watchdog --version: %v %q", err, out)
				}
			}
		})
	}
	if len(sums) != 4 {
		t.Errorf("SHA256SUMS lists %d files, want the 4 archives: %v", len(sums), sums)
	}
}

type chartMeta struct {
	Version     string            `json:"version"`
	AppVersion  string            `json:"appVersion"`
	Annotations map[string]string `json:"annotations"`
}

// packagedChart reads Chart.yaml out of the packaged chart.
func packagedChart(t *testing.T) (string, chartMeta) {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(dist, "agentenv-scheduler-watchdog-*.tgz"))
	must(t, err)
	if len(matches) != 1 {
		t.Fatalf("want one packaged chart in %s, found %v", dist, matches)
	}
	f, err := os.Open(matches[0])
	must(t, err)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	must(t, err)
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		must(t, err)
		if h.Name == "agentenv-scheduler-watchdog/Chart.yaml" {
			raw, err := io.ReadAll(tr)
			must(t, err)
			var c chartMeta
			must(t, yaml.Unmarshal(raw, &c))
			return matches[0], c
		}
	}
	t.Fatalf("%s has no Chart.yaml", matches[0])
	return "", chartMeta{}
}

// TestChartPackage: the packaged chart carries the Artifact Hub annotations
// (images, license, changes, links), and its image is the chart's appVersion.
func TestChartPackage(t *testing.T) {
	_, c := packagedChart(t)
	var images []struct{ Name, Image string }
	must(t, yaml.Unmarshal([]byte(c.Annotations["artifacthub.io/images"]), &images))
	if len(images) != 1 || images[0].Image != "ghcr.io/agentenv/scheduler-watchdog:"+c.AppVersion {
		t.Errorf("artifacthub.io/images %+v, want ghcr.io/agentenv/scheduler-watchdog:%s", images, c.AppVersion)
	}
	if c.Annotations["artifacthub.io/license"] != "MIT" {
		t.Errorf("artifacthub.io/license %q", c.Annotations["artifacthub.io/license"])
	}
	var changes []struct{ Kind, Description string }
	must(t, yaml.Unmarshal([]byte(c.Annotations["artifacthub.io/changes"]), &changes))
	if len(changes) == 0 || changes[0].Kind == "" || changes[0].Description == "" {
		t.Errorf("artifacthub.io/changes %+v", changes)
	}
	var links []struct{ Name, URL string }
	must(t, yaml.Unmarshal([]byte(c.Annotations["artifacthub.io/links"]), &links))
	if len(links) < 2 {
		t.Errorf("artifacthub.io/links %+v", links)
	}
}
