# watchdog: the README's quick start uses `make demo` and `make test`.
SHELL := /usr/bin/env bash
# The release toolchain, for the binary, the tests and govulncheck (README
# "Building": why this one). The go command fetches it from the module proxy once.
# The Dockerfile's build image follows it. The tools build with the machine's Go.
export GOTOOLCHAIN := go1.27.3

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
# The commit's time, not the clock's (SOURCE_DATE_EPOCH, reproducible builds): the
# same commit gives the same binaries, archives and image digests.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || date +%s)
DATE    ?= $(shell date -u -d @$(SOURCE_DATE_EPOCH) +%Y-%m-%dT%H:%M:%SZ 2>/dev/null || date -u -r $(SOURCE_DATE_EPOCH) +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS := -s -w \
	-X github.com/agentenv/watchdog/pkg/version.Version=$(VERSION) \
	-X github.com/agentenv/watchdog/pkg/version.Commit=$(COMMIT) \
	-X github.com/agentenv/watchdog/pkg/version.Date=$(DATE)

.PHONY: kustomize manifests prometheus3-test node cluster cluster-down e2e all build test unit vet fmt-check control-plane tools alertmanager pushgateway monitoring-tools chart-test lint-chart chart-readme event-docs cli-docs demo bench lint lint-tools vulndb-refresh fuzz binaries image dist chart-package release-check ko push push-needs-registry

all: build

## build: a static binary in bin/watchdog, built as the Dockerfile builds it
build:
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o bin/watchdog ./cmd/watchdog

## control-plane: build and cache kube-apiserver, etcd and kubectl (first build: docs/performance.md)
control-plane:
	hack/control-plane.sh >/dev/null

## tools: install and cache helm (from the Go module proxy)
tools:
	hack/tools.sh >/dev/null

## alertmanager: build and cache Alertmanager for the alertmanager sink's tests
alertmanager:
	hack/alertmanager.sh >/dev/null

## pushgateway: the Prometheus Pushgateway for the --pushgateway-url tests, cached (Debian's package where apt exists, else built; docs/performance.md)
pushgateway:
	hack/pushgateway.sh >/dev/null

## monitoring-tools: the Prometheus server and promtool (Debian's package where apt exists, else one build from the Prometheus module; docs/performance.md) and the Prometheus Operator's CRDs, for the chart's monitoring tests and the backtest tests
monitoring-tools:
	hack/prometheus.sh >/dev/null
	hack/prometheus-operator-crds.sh >/dev/null

# The chart's monitoring tests and test/backtest read these; they fail (never skip) without them.
MONITORING_ENV = PROMTOOL="$$(hack/promtool.sh --print)" PROMETHEUS="$$(hack/prometheus.sh --print)" PROMETHEUS_OPERATOR_CRDS="$$(hack/prometheus-operator-crds.sh --print)"

## test: everything CI runs: vet, gofmt, unit, integration and chart tests on a real API server
test: control-plane tools alertmanager pushgateway monitoring-tools vet fmt-check
	@echo "make test: test/e2e needs the real node and is skipped here: make e2e runs it (root on Linux)"
	KUBEBUILDER_ASSETS="$$(hack/control-plane.sh --print)" WATCHDOG_ALERTMANAGER="$$(hack/alertmanager.sh --print)" WATCHDOG_PUSHGATEWAY="$$(hack/pushgateway.sh --print)" $(MONITORING_ENV) go test -count=1 ./...

## unit: tests that need no control plane
unit:
	go test -count=1 $$(go list ./... | grep -v /test/)

vet:
	go vet -tags release ./...

fmt-check:
	@out="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## chart-test: the Helm chart: rendering, schema, RBAC, and install/upgrade/uninstall on a real API server
chart-test: control-plane tools monitoring-tools
	KUBEBUILDER_ASSETS="$$(hack/control-plane.sh --print)" $(MONITORING_ENV) go test -count=1 ./test/chart/

## prometheus3-test: the tests that use Prometheus again on 3.x built from its module (make test uses Debian's 2.42 on Debian, the oldest supported; most clusters run 3.x; CI runs both)
prometheus3-test: control-plane alertmanager pushgateway
	WATCHDOG_TOOLS_FROM=module hack/prometheus.sh >/dev/null
	KUBEBUILDER_ASSETS="$$(hack/control-plane.sh --print)" WATCHDOG_ALERTMANAGER="$$(hack/alertmanager.sh --print)" WATCHDOG_PUSHGATEWAY="$$(hack/pushgateway.sh --print)" \
	PROMTOOL="$$(WATCHDOG_TOOLS_FROM=module hack/promtool.sh --print)" PROMETHEUS="$$(WATCHDOG_TOOLS_FROM=module hack/prometheus.sh --print)" PROMETHEUS_OPERATOR_CRDS="$$(hack/prometheus-operator-crds.sh --print)" \
	go test -count=1 -run 'Prometheus|PromQL|Dashboard|Monitoring|Backtest|PushedCounters' ./test/chart/ ./test/backtest/ ./test/integration/

## chart-readme: regenerate the chart README's value table from values.yaml's `# --` comments (make test fails while it is stale)
chart-readme:
	go run ./hack/chart-readme

## kustomize: regenerate deploy/kustomize (a base, overlays shadow and live) from the chart (hack/kustomize; a chart test fails while it is stale)
kustomize: tools
	HELM="$$(hack/tools.sh --print)" go run ./hack/kustomize

## manifests: $(DIST)/install.yaml, the whole install in one file (the chart's defaults, shadow mode, namespace agentenv-system), byte-identical at every run; shipped with each release
manifests: tools
	HELM="$$(hack/tools.sh --print)" go run ./hack/kustomize -out "$$(mktemp -d)" -install $(DIST)/install.yaml

## event-docs: regenerate the event tables of README.md and docs/alerts.md from pkg/alert/events.go (make test fails while they are stale)
event-docs:
	go run ./hack/event-docs

## cli-docs: regenerate the command-line reference, docs/cli/, from the commands with cobra's doc generator (make test fails while it is stale)
cli-docs:
	go run ./hack/cli-docs

## node: build and cache kube-controller-manager, kube-scheduler, kubelet and kube-proxy for the real node (first build: docs/performance.md)
node:
	hack/node.sh >/dev/null

## cluster: start a real one-node cluster on this machine (root on Linux; docs/e2e.md): `export $$(hack/cluster.sh env)` then kubectl, helm
cluster: control-plane node
	hack/cluster.sh up

## cluster-down: stop the real node: processes, pods, mounts, cgroups, bridge, routes; sysctls restored
cluster-down:
	hack/cluster.sh down

## e2e: the end-to-end tests on a real one-node cluster (hack/cluster.sh, root on Linux): started, tested, stopped; elsewhere it says so and passes
E2E_TIMEOUT ?= 10m
# E2E_RUN: go test -run of test/e2e, e.g. E2E_RUN=TestRunModeLeaderKilledOnARealNode (all by default)
E2E_RUN ?= .
e2e:
	@if [ "$$(uname -s)" != Linux ] || [ "$$(id -u)" != 0 ]; then echo "make e2e: skipped: the real node needs root on Linux (docs/e2e.md)"; exit 0; fi; \
	$(MAKE) --no-print-directory control-plane node tools build || exit 1; \
	trap 'hack/cluster.sh down' EXIT; \
	hack/cluster.sh up || exit 1; \
	set -a; . <(hack/cluster.sh env); set +a; \
	WATCHDOG_E2E=1 HELM="$$(hack/tools.sh --print)" WATCHDOG_BIN="$(abspath bin/watchdog)" \
	  go test -count=1 -v -parallel 4 -timeout $(E2E_TIMEOUT) -run '$(E2E_RUN)' ./test/e2e/

## lint-chart: helm lint --strict of the chart
lint-chart: tools
	"$$(hack/tools.sh --print)" lint --strict charts/agentenv-scheduler-watchdog

## demo: the README's run command: a simulated AgentENV scheduler through healthy → wedged → restart → recovered; on the real node (hack/cluster.sh) as root on Linux, else on a local control plane
demo: control-plane build
	@if [ "$$(uname -s)" = Linux ] && [ "$$(id -u)" = 0 ] && [ -z "$(DEMO_NO_NODE)" ]; then \
	  $(MAKE) --no-print-directory node tools || exit 1; \
	  trap 'hack/cluster.sh down' EXIT; \
	  hack/cluster.sh up || exit 1; \
	  set -a; . <(hack/cluster.sh env); set +a; \
	  go run ./hack/demo -node -helm "$$(hack/tools.sh --print)" -watchdog bin/watchdog -release-go $(GOTOOLCHAIN); \
	else \
	  echo "make demo: on a local control plane (the real node needs root on Linux; DEMO_NO_NODE=1 chooses this)"; \
	  go run ./hack/demo -watchdog bin/watchdog -release-go $(GOTOOLCHAIN); \
	fi

## bench: every benchmark, printing figures (docs/performance.md records them)
bench: control-plane build
	@missing=""; for t in jq curl; do command -v $$t >/dev/null || missing="$$missing $$t"; done; \
	if [ -n "$$missing" ]; then echo "make bench: missing:$$missing (the stop-gap script the benchmark compares with uses them; install them with your package manager)" >&2; exit 1; fi
	@echo "== binary size (stripped, as the Dockerfile builds it)"; ls -l bin/watchdog | awk '{printf "%.1f MB\n", $$5/1048576}'
	go test -run '^$$' -bench Extract -benchmem ./pkg/scrape/
	KUBEBUILDER_ASSETS="$$(hack/control-plane.sh --print)" go test -run '^$$' -bench 'CheckHealthy|CheckVsScript' -benchtime 30x ./test/integration/
	KUBEBUILDER_ASSETS="$$(hack/control-plane.sh --print)" go test -run '^$$' -bench 'APIRequests|HealLatency' -benchtime 1x ./test/integration/

## lint: gofmt, go vet, golangci-lint (.golangci.yml), actionlint over .github/workflows, the release binary's Go, the vulnerability database's age (VULNDB_MAX_AGE_DAYS, default 90) and govulncheck against that offline database (tools: hack/lint-tools.sh, hack/actionlint.sh)
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

# ---- release artifacts (README "Releases"; .github/workflows/release.yml runs these) ----
DIST ?= dist
BIN_PLATFORMS := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
IMAGE_PLATFORMS := linux/amd64 linux/arm64
# local: a base assembled from this machine's CA bundle (no registry needed), make
# image's; make push (and so the release) builds on the Dockerfile's distroless,
# pinned by digest.
RELEASE_BASE := $(shell sed -n 's/^FROM \([^ ]*distroless[^ ]*\).*/\1/p' Dockerfile)
IMAGE_BASE ?= $(if $(filter push,$(MAKECMDGOALS)),$(RELEASE_BASE),local)
CHART_DIR := charts/agentenv-scheduler-watchdog

## binaries: the static binary for every release platform in dist/bin/<os>_<arch>/, built as `make build` builds it
binaries:
	@for p in $(BIN_PLATFORMS); do \
	  os=$${p%/*}; arch=$${p#*/}; echo "go build $$os/$$arch"; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch go build -trimpath -ldflags '$(LDFLAGS)' -o $(DIST)/bin/$${os}_$${arch}/watchdog ./cmd/watchdog || exit 1; \
	done

ko:
	hack/ko.sh >/dev/null

# What ko (hack/image.sh) stamps: the binary's version, the labels, the image's time.
IMAGE_ENV = VERSION=$(VERSION) COMMIT=$(COMMIT) DATE=$(DATE) SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) IMAGE_BASE=$(IMAGE_BASE)
CHART_PACKAGE = $(DIST)/agentenv-scheduler-watchdog-$$(awk '/^version:/ {print $$2}' $(CHART_DIR)/Chart.yaml).tgz

## image: the multi-arch image (linux/amd64, linux/arm64) as an OCI image layout in dist/image, built by ko without a Docker daemon (hack/image.sh), and an SPDX SBOM per image in dist/sbom
image: ko
	$(IMAGE_ENV) hack/image.sh layout $(DIST)/image $(DIST)/sbom

## dist: version-stamped archives of watchdog for linux and darwin, amd64 and arm64, with SHA256SUMS, in dist/
dist: binaries
	go run ./hack/release archive --out $(DIST) --version $(VERSION) --created $(DATE) --file LICENSE --file README.md \
	  $(foreach p,$(BIN_PLATFORMS),$(p)=$(DIST)/bin/$(subst /,_,$(p))/watchdog)

## chart-package: the chart as dist/agentenv-scheduler-watchdog-<version>.tgz, after helm lint --strict; reproducible (every entry at the commit's time, not helm's clock)
chart-package: tools
	"$$(hack/tools.sh --print)" lint --strict $(CHART_DIR)
	"$$(hack/tools.sh --print)" package $(CHART_DIR) --destination $(DIST)
	go run ./hack/release chart --created $(DATE) $(CHART_PACKAGE)

## push: build with ko and push the multi-arch image, its SBOMs and the chart to REGISTRY (any OCI registry, e.g. make push REGISTRY=registry.corp.example/platform) with your docker login / credential helpers and helm registry login; prints the digests and the helm install line (INSECURE=1: plain http, a registry on loopback)
# Without REGISTRY nothing is built: the one prerequisite says what to set.
push: $(if $(REGISTRY),ko chart-package,push-needs-registry)
	$(IMAGE_ENV) REGISTRY=$(REGISTRY) INSECURE=$(INSECURE) CHART=$(CHART_PACKAGE) SBOM_DIR=$(DIST)/sbom HELM="$$(hack/tools.sh --print)" hack/push.sh

push-needs-registry:
	@echo "make push: set REGISTRY, e.g. make push REGISTRY=registry.corp.example/platform" >&2; exit 2

## release-check: a whole release locally: the artifacts checked, pushed to an OCI registry on loopback and installed from oci:// onto a real API server (test/release)
release-check: image dist chart-package control-plane tools
	KUBEBUILDER_ASSETS="$$(hack/control-plane.sh --print)" HELM="$$(hack/tools.sh --print)" RELEASE_DIST="$(abspath $(DIST))" RELEASE_VERSION="$(VERSION)" RELEASE_COMMIT="$(COMMIT)" \
	  go test -tags release -count=1 -v ./test/release/
