package main

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// archiveCommand writes watchdog_<version>_<os>_<arch>.tar.gz per binary, each with
// the binary and the extra files, reproducibly (one time, numeric owners, no gzip
// name or time), and SHA256SUMS over them in sha256sum's format.
func archiveCommand(args []string) error {
	fs := flag.NewFlagSet("archive", flag.ContinueOnError)
	out := fs.String("out", "dist", "directory for the archives and SHA256SUMS")
	version := fs.String("version", "", "version in the archive names")
	created := fs.String("created", "", "time of every entry, RFC 3339 (the commit's time)")
	var extra multiFlag
	fs.Var(&extra, "file", "a file to put beside the binary (repeat): LICENSE, README.md")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *version == "" || *created == "" || fs.NArg() == 0 {
		return errors.New("archive: --version, --created and OS/ARCH=PATH arguments are required")
	}
	at, err := time.Parse(time.RFC3339, *created)
	if err != nil {
		return fmt.Errorf("--created: %w", err)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	var sums []string
	for _, arg := range fs.Args() {
		platform, path, ok := strings.Cut(arg, "=")
		goos, goarch, ok2 := strings.Cut(platform, "/")
		if !ok || !ok2 {
			return fmt.Errorf("%q: want OS/ARCH=PATH", arg)
		}
		archive := fmt.Sprintf("watchdog_%s_%s_%s.tar.gz", strings.TrimPrefix(*version, "v"), goos, goarch)
		entries := map[string]string{"watchdog": path}
		for _, f := range extra {
			entries[filepath.Base(f)] = f
		}
		sum, err := writeArchive(filepath.Join(*out, archive), entries, at)
		if err != nil {
			return fmt.Errorf("%s: %w", archive, err)
		}
		sums = append(sums, sum+"  "+archive)
	}
	sort.Strings(sums)
	if err := os.WriteFile(filepath.Join(*out, "SHA256SUMS"), []byte(strings.Join(sums, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	fmt.Printf("%s: %d archives and SHA256SUMS\n", *out, len(sums))
	return nil
}

// writeArchive writes name (entry → source path) and returns its hex SHA-256.
func writeArchive(path string, entries map[string]string, at time.Time) (string, error) {
	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
	}
	sort.Strings(names)
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	gz := gzip.NewWriter(io.MultiWriter(f, h))
	tw := tar.NewWriter(gz)
	for _, n := range names {
		data, err := os.ReadFile(entries[n])
		if err != nil {
			return "", err
		}
		mode := int64(0o644)
		if n == "watchdog" {
			mode = 0o755
		}
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: mode, Size: int64(len(data)), ModTime: at.UTC(), Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			return "", err
		}
		if _, err := tw.Write(data); err != nil {
			return "", err
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	if err := gz.Close(); err != nil {
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
