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
	var opts []name.Option
	if *insecure {
		opts = append(opts, name.Insecure)
	}
	ref, err := name.NewTag(*refFlag, opts...)
	if err != nil {
		return fmt.Errorf("--ref: %w", err)
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
