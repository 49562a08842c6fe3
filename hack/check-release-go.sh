#!/usr/bin/env bash
# Fails unless the watchdog binary was built with the release toolchain: the Go that
# `watchdog version` names ("watchdog v1.2.3 (commit abc1234, built <date>, go1.27.3
# linux/amd64)") must be the one given (the Makefile's GOTOOLCHAIN). A binary built
# by a plain `go build` with the machine's Go would ship that Go's standard library
# and its vulnerabilities; govulncheck scans the source with the release toolchain
# and cannot see that.
#
#   hack/check-release-go.sh bin/watchdog go1.27.3
set -euo pipefail
bin="${1:?usage: $0 <watchdog binary> <go version>}"
want="${2:?usage: $0 <watchdog binary> <go version>}"
[[ -x "$bin" ]] || { echo "check-release-go: no binary at $bin (make build)" >&2; exit 1; }
out="$("$bin" version)"
got="$(sed -n 's/^watchdog .* (commit [^,]*, built [^,]*, \(go[^ ]*\) [^ ]*)$/\1/p' <<<"$out")"
if [[ -z "$got" ]]; then
  echo "check-release-go: cannot read the Go version from '$out'" >&2
  exit 1
fi
if [[ "$got" != "$want" ]]; then
  echo "check-release-go: $bin was built with $got, not the release toolchain $want: build it with 'make build' (GOTOOLCHAIN=$want)" >&2
  exit 1
fi
echo "release binary $bin: built with $got"
