# syntax=docker/dockerfile:1
# Multi-stage build of the static watchdog binary into a distroless, non-root image.
#   docker build --build-arg VERSION=$(git describe --tags --always) \
#     --build-arg COMMIT=$(git rev-parse --short HEAD) \
#     --build-arg DATE=$(date -u +%Y-%m-%dT%H:%M:%SZ) -t agentenv-scheduler-watchdog .
# test/build/static_test.go builds with the flags of the RUN line below and proves
# the result is static and runs with an empty environment (no Docker engine in CI).

FROM golang:1.27.3-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd ./cmd
COPY pkg ./pkg
ARG VERSION=dev
ARG COMMIT=unknown
ARG DATE=unknown
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags "-s -w -X github.com/agentenv/watchdog/pkg/version.Version=${VERSION} -X github.com/agentenv/watchdog/pkg/version.Commit=${COMMIT} -X github.com/agentenv/watchdog/pkg/version.Date=${DATE}" -o /out/watchdog ./cmd/watchdog

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/watchdog /watchdog
# nonroot: uid/gid 65532; the chart also sets runAsNonRoot and a read-only root.
USER 65532:65532
ENTRYPOINT ["/watchdog"]
CMD ["check"]
