// Command release holds what ko and helm do not: the base ko builds on where no
// registry but one on loopback can be reached, the OCI registry on loopback that
// the release check and the real node use, single-binary images for the real
// node, reproducible chart packages and the release archives.
//
//	release base     --ref REGISTRY/REPO:TAG [--ca-bundle F] [--insecure]
//	                 the local base (CA bundle, passwd with uid 65532) for linux/amd64
//	                 and linux/arm64, pushed; prints REPO@DIGEST
//	release registry --addr 127.0.0.1:0 [--addr-file F] [--basic-auth-file F [--token]] [--tls-cert C --tls-key K]
//	                 an OCI registry on loopback
//	release binary-image --binary PATH [--cmd ARG] [--ca-bundle F] --ref REGISTRY/REPO:TAG [--insecure]
//	release chart    --created T dist/CHART-VERSION.tgz ...   (helm package's output, made reproducible)
//	release archive  --out dist --version V --file LICENSE --file README.md OS/ARCH=PATH ...
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: release base|registry|binary-image|chart|archive [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "base":
		err = baseCommand(os.Args[2:])
	case "registry":
		err = registryCommand(os.Args[2:])
	case "binary-image":
		err = binaryImageCommand(os.Args[2:])
	case "chart":
		err = chartCommand(os.Args[2:])
	case "archive":
		err = archiveCommand(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: want base, registry, binary-image, chart or archive", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}
