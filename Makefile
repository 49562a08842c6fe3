# watchdog: the README's quick start uses `make demo` and `make test`.
SHELL := /usr/bin/env bash
export GOTOOLCHAIN := local

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
DATE    ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS := -s -w \
	-X github.com/agentenv/watchdog/pkg/version.Version=$(VERSION) \
	-X github.com/agentenv/watchdog/pkg/version.Commit=$(COMMIT) \
	-X github.com/agentenv/watchdog/pkg/version.Date=$(DATE)

.PHONY: all build test unit vet fmt-check control-plane tools chart-test lint-chart demo bench

all: build

## build: a static binary in bin/watchdog, built as the Dockerfile builds it
build:
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o bin/watchdog ./cmd/watchdog

## control-plane: build and cache kube-apiserver, etcd and kubectl (first time ~5-15 min)
control-plane:
	hack/control-plane.sh >/dev/null

## tools: install and cache helm (from the Go module proxy; first time ~2-5 min)
tools:
	hack/tools.sh >/dev/null

## test: everything CI runs: vet, gofmt, unit, integration and chart tests on a real API server
test: control-plane tools vet fmt-check
	KUBEBUILDER_ASSETS="$$(hack/control-plane.sh --print)" go test -count=1 ./...

## unit: tests that need no control plane
unit:
	go test -count=1 $$(go list ./... | grep -v /test/)

vet:
	go vet ./...

fmt-check:
	@out="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## chart-test: the Helm chart: rendering, schema, RBAC, and install/upgrade/uninstall on a real API server
chart-test: control-plane tools
	KUBEBUILDER_ASSETS="$$(hack/control-plane.sh --print)" go test -count=1 ./test/chart/

## lint-chart: helm lint --strict of the chart
lint-chart: tools
	"$$(hack/tools.sh --print)" lint --strict charts/agentenv-scheduler-watchdog

## demo: the README's run command: a local control plane and a simulated scheduler through healthy → wedged → restart → recovered
demo: control-plane build
	go run ./hack/demo -watchdog bin/watchdog

## bench: every benchmark, printing figures (docs/performance.md records them)
bench: control-plane build
	@command -v jq >/dev/null && command -v curl >/dev/null || { apt-get update -qq && apt-get install -y -qq jq curl; }
	@echo "== binary size (stripped, as the Dockerfile builds it)"; ls -l bin/watchdog | awk '{printf "%.1f MB\n", $$5/1048576}'
	go test -run '^$$' -bench Extract -benchmem ./pkg/scrape/
	KUBEBUILDER_ASSETS="$$(hack/control-plane.sh --print)" go test -run '^$$' -bench 'CheckHealthy|CheckVsScript' -benchtime 30x ./test/integration/
	KUBEBUILDER_ASSETS="$$(hack/control-plane.sh --print)" go test -run '^$$' -bench 'APIRequests|HealLatency' -benchtime 1x ./test/integration/
