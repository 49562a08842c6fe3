# Sourced by hack/control-plane.sh and hack/node.sh: the scratch module that builds
# Kubernetes commands outside the Kubernetes repository. k8s.io/kubernetes replaces
# ~33 ./staging modules; the scratch module re-points each at its published v0.x
# release so that `go build k8s.io/kubernetes/cmd/...` works from the module proxy.

# k8s_module DIR NAME CMD...: in DIR, a module NAME requiring k8s.io/kubernetes
# $K8S_VERSION and importing the commands CMD (kube-apiserver, kubelet, ...); sets
# K8S_LDFLAGS, which stamp the version the binaries report.
k8s_module() {
  local dir=$1 name=$2 modfile go_line m c minor
  shift 2
  mkdir -p "$dir"
  (
    cd "$dir"
    go mod init "$name" >/dev/null 2>&1
    modfile="$(go mod download -json "k8s.io/kubernetes@${K8S_VERSION}" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
    go_line="$(sed -n 's/^go \([0-9.]*\).*/\1/p' "$modfile")"
    go mod edit -go="$go_line" -require="k8s.io/kubernetes@${K8S_VERSION}"
    for m in $(sed -n 's#^[[:space:]]*\(k8s.io/[^[:space:]]*\) => ./staging/.*#\1#p' "$modfile"); do
      go mod edit -replace="$m=$m@v0.${K8S_VERSION#v1.}"
    done
    {
      printf '//go:build tools\n\npackage tools\n\nimport (\n'
      for c in "$@"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c"; done
      printf ')\n'
    } > tools.go
    go mod tidy >/dev/null
  )
  minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
  K8S_LDFLAGS="-s -w -X k8s.io/component-base/version.gitVersion=${K8S_VERSION} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${minor} -X k8s.io/client-go/pkg/version.gitVersion=${K8S_VERSION} -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=${minor}"
}
