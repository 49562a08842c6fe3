package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

// chartCommand makes the chart packages helm wrote reproducible, in place: `helm
// package` stamps every entry with the time it ran, so two packagings of one
// commit differ. Each entry gets --created (the commit's time) instead; names,
// order, modes, contents and helm's gzip header (its Extra and Comment) are kept.
func chartCommand(args []string) error {
	fs := flag.NewFlagSet("chart", flag.ContinueOnError)
	created := fs.String("created", "", "time of every entry, RFC 3339 (the commit's time)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *created == "" || fs.NArg() == 0 {
		return errors.New("chart: --created and the .tgz files are required")
	}
	at, err := time.Parse(time.RFC3339, *created)
	if err != nil {
		return fmt.Errorf("--created: %w", err)
	}
	for _, path := range fs.Args() {
		if err := normalizeChart(path, at); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return nil
}

// normalizeChart rewrites the chart package at path with every entry's time at.
func normalizeChart(path string, at time.Time) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	zw.Extra, zw.Comment, zw.Name = zr.Extra, zr.Comment, zr.Name // no ModTime: none
	tr, tw := tar.NewReader(zr), tar.NewWriter(zw)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		h.ModTime, h.AccessTime, h.ChangeTime = at.UTC(), time.Time{}, time.Time{}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, out.Bytes(), 0o644)
}
