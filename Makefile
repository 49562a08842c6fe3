# watchdog: the README's quick start uses `make demo` and `make test`.
SHELL := /usr/bin/env bash
# The release toolchain, for the binary, the tests and govulncheck: this machine's
# go1.26.8 has 12 reachable standard-library vulnerabilities (fixed in 1.26.9 and
# 1.26.10, which the module proxy does not serve); go1.27.3 has none. The go
# command fetches it from the module proxy once (76 MB). The Dockerfile's build
# image follows it. The control plane and the tools build with the machine's Go.
export GOTOOLCHAIN := go1.27.3

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
DATE    ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS := -s -w \
	-X github.com/agentenv/watchdog/pkg/version.Version=$(VERSION) \
	-X github.com/agentenv/watchdog/pkg/version.Commit=$(COMMIT) \
	-X github.com/agentenv/watchdog/pkg/version.Date=$(DATE)

.PHONY: all build test unit vet fmt-check control-plane tools alertmanager monitoring-tools chart-test lint-chart chart-readme event-docs demo bench lint lint-tools vulndb-refresh fuzz

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

## alertmanager: build and cache Alertmanager for the alertmanager sink's tests (first time ~4 min with the module cache warm, ~11 min cold on 2 shared cores)
alertmanager:
	hack/alertmanager.sh >/dev/null

## monitoring-tools: the Prometheus server and promtool (one build from the Prometheus module; build times in docs/performance.md) and the Prometheus Operator's CRDs, for the chart's monitoring tests and the backtest tests
monitoring-tools:
	hack/prometheus.sh >/dev/null
	hack/prometheus-operator-crds.sh >/dev/null

# The chart's monitoring tests and test/backtest read these; they fail (never skip) without them.
MONITORING_ENV = PROMTOOL="$$(hack/promtool.sh --print)" PROMETHEUS="$$(hack/prometheus.sh --print)" PROMETHEUS_OPERATOR_CRDS="$$(hack/prometheus-operator-crds.sh --print)"

## test: everything CI runs: vet, gofmt, unit, integration and chart tests on a real API server
test: control-plane tools alertmanager monitoring-tools vet fmt-check
	KUBEBUILDER_ASSETS="$$(hack/control-plane.sh --print)" WATCHDOG_ALERTMANAGER="$$(hack/alertmanager.sh --print)" $(MONITORING_ENV) go test -count=1 ./...

## unit: tests that need no control plane
unit:
	go test -count=1 $$(go list ./... | grep -v /test/)

vet:
	go vet ./...

fmt-check:
	@out="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## chart-test: the Helm chart: rendering, schema, RBAC, and install/upgrade/uninstall on a real API server
chart-test: control-plane tools monitoring-tools
	KUBEBUILDER_ASSETS="$$(hack/control-plane.sh --print)" $(MONITORING_ENV) go test -count=1 ./test/chart/

## chart-readme: regenerate the chart README's value table from values.yaml's `# --` comments (make test fails while it is stale)
chart-readme:
	go run ./hack/chart-readme

## event-docs: regenerate the event tables of README.md and docs/alerts.md from pkg/alert/events.go (make test fails while they are stale)
event-docs:
	go run ./hack/event-docs

## lint-chart: helm lint --strict of the chart
lint-chart: tools
	"$$(hack/tools.sh --print)" lint --strict charts/agentenv-scheduler-watchdog

## demo: the README's run command: a local control plane and a simulated scheduler through healthy → wedged → restart → recovered
demo: control-plane build
	go run ./hack/demo -watchdog bin/watchdog -release-go $(GOTOOLCHAIN)

## bench: every benchmark, printing figures (docs/performance.md records them)
bench: control-plane build
	@missing=""; for t in jq curl; do command -v $$t >/dev/null || missing="$$missing $$t"; done; \
	if [ -n "$$missing" ]; then echo "make bench: missing:$$missing (the stop-gap script the benchmark compares with uses them; install them with your package manager)" >&2; exit 1; fi
	@echo "== binary size (stripped, as the Dockerfile builds it)"; ls -l bin/watchdog | awk '{printf "%.1f MB\n", $$5/1048576}'
	go test -run '^$$' -bench Extract -benchmem ./pkg/scrape/
	KUBEBUILDER_ASSETS="$$(hack/control-plane.sh --print)" go test -run '^$$' -bench 'CheckHealthy|CheckVsScript' -benchtime 30x ./test/integration/
	KUBEBUILDER_ASSETS="$$(hack/control-plane.sh --print)" go test -run '^$$' -bench 'APIRequests|HealLatency' -benchtime 1x ./test/integration/

## lint: gofmt, go vet, golangci-lint (.golangci.yml), the release binary's Go, the vulnerability database's age (VULNDB_MAX_AGE_DAYS, default 90) and govulncheck against that offline database (tools: hack/lint-tools.sh, first time 10-20 min)
lint: build
	VULN_GOTOOLCHAIN=$(GOTOOLCHAIN) hack/lint.sh

## vulndb-refresh: pin the newest Go vulnerability database the module proxy serves (golang.org/x/vulndb) and build it; commit the change
vulndb-refresh:
	VULN_GOTOOLCHAIN=$(GOTOOLCHAIN) hack/vulndb-refresh.sh

lint-tools:
	VULN_GOTOOLCHAIN=$(GOTOOLCHAIN) hack/lint-tools.sh >/dev/null

## fuzz: each fuzzer for FUZZTIME (default 10m), one after another; the kept corpora run as ordinary tests in make test
FUZZTIME ?= 10m
fuzz:
	go test ./pkg/scrape -run '^$$' -fuzz '^FuzzExtract$$' -fuzztime $(FUZZTIME) -parallel 1
	go test ./pkg/state -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) -parallel 1
	go test ./pkg/cli -run '^$$' -fuzz '^FuzzFlags$$' -fuzztime $(FUZZTIME) -parallel 1
