package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// pushCommand pushes the layout's image index and prints its digest. Credentials
// come from the Docker config (docker login, or the release workflow's login).
func pushCommand(args []string) error {
	fs := flag.NewFlagSet("push", flag.ContinueOnError)
	dir := fs.String("layout", "dist/image", "OCI image layout written by `release image`")
	refFlag := fs.String("ref", "", "where to push: REGISTRY/REPOSITORY:TAG")
	insecure := fs.Bool("insecure", false, "plain HTTP (a registry on loopback)")
	// A registry that stops answering would otherwise hold the release job until
	// the workflow's own timeout, with nothing said.
	timeout := fs.Duration("timeout", 10*time.Minute, "deadline of the whole push")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *refFlag == "" {
		return errors.New("push: --ref is required")
	}
	ref, err := tagRef(*refFlag, *insecure)
	if err != nil {
		return err
	}
	idx, err := layoutIndex(*dir)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := remote.WriteIndex(ref, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return fmt.Errorf("push %s (--timeout %s): %w", ref, *timeout, err)
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Println(d)
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
