// Command release assembles the release artifacts the Makefile's image and dist
// targets name, from binaries the Makefile built (it owns the build flags), with
// go-containerregistry: no Docker daemon and no registry is needed to build.
//
//	release image   --out dist/image --binary linux/amd64=PATH ... --version V --revision R --created T
//	release archive --out dist --version V --file LICENSE --file README.md OS/ARCH=PATH ...
//	release push    --layout dist/image --ref REGISTRY/REPO:TAG [--insecure]
//	release publish --registry REGISTRY[/PATH] --chart dist/CHART.tgz [--layout dist/image] [--sbom-dir dist/sbom] [--helm PATH] [--insecure]
//	release registry --addr 127.0.0.1:0 [--addr-file F] [--basic-auth-file F [--token]] [--tls-cert C --tls-key K]
//	                 an OCI registry on loopback
//	release binary-image --binary PATH [--cmd ARG] --ref REGISTRY/REPO:TAG [--insecure]
//	release chart   --created T dist/CHART-VERSION.tgz ...   (helm package's output, made reproducible)
//
// push prints the digest it pushed; the release workflow and `make release-check`
// use it alike.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: release image|archive|push|publish|registry|binary-image|chart [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "image":
		err = imageCommand(os.Args[2:])
	case "archive":
		err = archiveCommand(os.Args[2:])
	case "push":
		err = pushCommand(os.Args[2:])
	case "publish":
		err = publishCommand(os.Args[2:], os.Stdout)
	case "registry":
		err = registryCommand(os.Args[2:])
	case "binary-image":
		err = binaryImageCommand(os.Args[2:])
	case "chart":
		err = chartCommand(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: want image, archive, push, publish, registry, binary-image or chart", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}
