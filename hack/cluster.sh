#!/usr/bin/env bash
# A real one-node Kubernetes cluster on this machine, for the end-to-end tests and
# `make demo`: the control plane of hack/control-plane.sh (kube-apiserver, etcd), the
# node binaries of hack/node.sh (kube-controller-manager, kube-scheduler, kubelet,
# kube-proxy), containerd + runc + the CNI plugins (Debian packages, installed when
# missing), and an OCI registry on loopback that containerd pulls every image from.
# docs/e2e.md says how it is laid out and what it does not prove.
#
#   hack/cluster.sh up      start it (stops what it started if the start fails)
#   hack/cluster.sh down    stop everything, restore sysctls, remove bridge, mounts, cgroups
#   hack/cluster.sh env     print the environment a client needs (KUBECONFIG, WATCHDOG_REGISTRY, ...)
#
# Traffic stays on this machine: an `unreachable` route for the node's range is put in
# place before anything starts and removed last; nothing listens on 0.0.0.0 (the API
# server serves on the bridge address, the rest on 127.0.0.1). Needs root on Linux.
set -euo pipefail

if [[ "$(uname -s)" != Linux || "$(id -u)" != 0 ]]; then
  echo "cluster: a real node needs root on Linux (containerd, cgroups, a bridge); this is $(uname -s) as uid $(id -u)" >&2
  exit 2
fi

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STATE="${WATCHDOG_CLUSTER_DIR:-/var/lib/watchdog-cluster}"
LOGS="$STATE/logs"
PIDS="$STATE/pids"

# The node's addresses: 198.19.0.0/16, the upper half of the benchmarking range (RFC
# 2544, never routed): the tests' network-namespace hosts take /30s of 198.18.0.0/16.
RANGE=198.19.0.0/16
BRIDGE=wdcluster0
BRIDGE_IP=198.19.0.1
POD_CIDR=198.19.0.0/24
SERVICE_CIDR=198.19.1.0/24
KUBERNETES_SERVICE_IP=198.19.1.1
API_PORT=6443
CGROUP_ROOT=watchdog-cluster

log() { echo "cluster: $*" >&2; }
die() { log "$*"; exit 1; }

# ---- stop -------------------------------------------------------------------------

# stop_pid NAME GRACE: SIGTERM the process we started as NAME, SIGKILL after GRACE s.
stop_pid() {
  local name=$1 grace=${2:-10} f="$PIDS/$1" pid i
  [[ -f "$f" ]] || return 0
  pid="$(cat "$f")"
  if kill -0 "$pid" 2>/dev/null && [[ "$(cat /proc/"$pid"/environ 2>/dev/null | tr '\0' '\n' | grep -c '^WATCHDOG_CLUSTER_PROC=')" -gt 0 ]]; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < grace * 10; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then log "$name ($pid) still running after ${grace}s: SIGKILL"; kill -KILL "$pid" 2>/dev/null || true; fi
    for ((i = 0; i < 50; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -f "$f"
}

# cgroup_dirs: our cgroup folders in every v1 hierarchy (and the unified one), deepest first.
cgroup_dirs() {
  local h
  for h in /sys/fs/cgroup/*/; do
    [[ -d "$h$CGROUP_ROOT" ]] && find "$h$CGROUP_ROOT" -depth -type d
  done
  return 0
}

down() {
  set +e
  [[ -d "$STATE" ]] || { log "nothing to stop ($STATE does not exist)"; routes_down; return 0; }
  log "stopping (state in $STATE)"
  # Controllers first, so nothing recreates what is being removed; then the kubelet,
  # the pods, the runtime; the API server before the network it serves on.
  stop_pid kube-controller-manager 10
  stop_pid kube-scheduler 10
  stop_pid kube-proxy 10
  stop_pid kubelet 15
  # Every process in a pod (containers and sandboxes) lives in our cgroups: kill them
  # there, then the shims of our containerd (they name its socket).
  local d pid pass
  for pass in 1 2 3; do
    for d in $(cgroup_dirs); do
      [[ -f "$d/cgroup.procs" ]] || continue
      while read -r pid; do [[ -n "$pid" ]] && kill -KILL "$pid" 2>/dev/null; done < "$d/cgroup.procs"
    done
    sleep 0.5
  done
  for pid in $(pgrep -f -- "-address $STATE/containerd/containerd.sock" 2>/dev/null); do
    [[ "$(readlink /proc/"$pid"/exe 2>/dev/null)" == */containerd-shim-runc-v2 ]] && kill -KILL "$pid" 2>/dev/null
  done
  stop_pid containerd 15
  stop_pid kube-apiserver 15
  stop_pid etcd 10
  stop_pid registry 5
  # kube-proxy's iptables chains (it removes only its own).
  if [[ -x "$STATE/bin/kube-proxy" ]]; then
    "$STATE/bin/kube-proxy" --cleanup >"$LOGS/kube-proxy-cleanup.log" 2>&1 || log "kube-proxy --cleanup failed: see $LOGS/kube-proxy-cleanup.log"
  fi
  kubelet_chain_remove
  # Mounts under our folder (pod volumes, container root filesystems, sandbox shm),
  # deepest first; then the pod network namespaces containerd bind-mounted.
  local m
  for m in $(awk -v s="$STATE/" 'index($2, s) == 1 {print $2}' /proc/mounts | sort -r); do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "could not unmount $m"
  done
  if [[ -f "$STATE/netns.before" ]]; then
    for m in /run/netns/cni-*; do
      [[ -e "$m" ]] || continue
      grep -qxF "$m" "$STATE/netns.before" && continue
      umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
      rm -f "$m"
    done
  fi
  for d in $(cgroup_dirs); do rmdir "$d" 2>/dev/null || log "could not remove cgroup $d"; done
  # The pods' host-side veths, then the bridge.
  for d in $(ip -o link show master "$BRIDGE" 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do ip link del "$d" 2>/dev/null; done
  ip link del "$BRIDGE" 2>/dev/null
  sysctls_restore
  [[ -f "$STATE/run-containerd.created" ]] && rm -rf /run/containerd
  # Keep the logs for a post-mortem; everything else goes, unless something is still
  # mounted there (removing through a mount could reach the host's files).
  if awk -v s="$STATE/" 'index($2, s) == 1 {found=1} END {exit !found}' /proc/mounts; then
    log "mounts remain under $STATE: not removing it (see /proc/mounts)"
  else
    find "$STATE" -mindepth 1 -maxdepth 1 ! -name logs -exec rm -rf {} + 2>/dev/null
  fi
  routes_down
  log "stopped; logs kept in $LOGS"
  return 0
}

routes_down() { ip route del unreachable "$RANGE" 2>/dev/null || true; }

# The kubelet's KUBE-FIREWALL chain and its jumps from INPUT and OUTPUT (filter table,
# IPv4 and IPv6), which kube-proxy --cleanup leaves: removed unless there before `up`.
kubelet_chain_save() {
  local cmd
  for cmd in iptables ip6tables; do
    "$cmd-save" -t filter 2>/dev/null | grep '^:KUBE-FIREWALL ' >/dev/null && echo "$cmd"
  done > "$STATE/kube-firewall.before"
  return 0
}
kubelet_chain_remove() {
  [[ -f "$STATE/kube-firewall.before" ]] || return 0
  local cmd c
  for cmd in iptables ip6tables; do
    grep -qxF "$cmd" "$STATE/kube-firewall.before" && continue
    for c in INPUT OUTPUT; do
      while "$cmd" -w 5 -D "$c" -j KUBE-FIREWALL 2>/dev/null; do :; done
    done
    "$cmd" -w 5 -F KUBE-FIREWALL 2>/dev/null && "$cmd" -w 5 -X KUBE-FIREWALL 2>/dev/null
  done
  return 0
}

# Sysctls: the kubelet and kube-proxy change some they have no switch for
# (vm.overcommit_memory, kernel.panic, kernel.panic_on_oops, ...). All are saved
# before anything starts; at stop, every one that changed is written back.
VOLATILE='^(fs\.|kernel\.core_modes|kernel\.random\.|kernel\.ns_last_pid|kernel\.pty\.nr|kernel\.sched_domain|net\.netfilter\.nf_conntrack_count|kernel\.tainted|vm\.stat_refresh|net\.ipv4\.tcp_fastopen_key|kernel\.core_uses_pid)'
sysctls_save() { sysctl -a 2>/dev/null | grep -Ev "$VOLATILE" > "$STATE/sysctl.before"; }
sysctls_restore() {
  [[ -f "$STATE/sysctl.before" ]] || return 0
  local key val now restored=()
  while IFS= read -r line; do
    key="${line%% = *}"; val="${line#* = }"
    now="$(sysctl -n "$key" 2>/dev/null)" || continue # a link's keys go with the link
    [[ "$now" == "$val" ]] && continue
    if sysctl -w "$key=$val" >/dev/null 2>&1; then restored+=("$key"); else log "could not restore $key=$val (now $now)"; fi
  done < "$STATE/sysctl.before"
  ((${#restored[@]})) && log "restored sysctls: ${restored[*]}"
  return 0
}

# ---- start ------------------------------------------------------------------------

# start NAME ARGS...: run a component in the background, its own session, logs in $LOGS.
# WATCHDOG_CLUSTER_PROC marks it ours, so stop never signals a reused PID.
start() {
  local name=$1; shift
  WATCHDOG_CLUSTER_PROC="$name" setsid "$@" >"$LOGS/$name.log" 2>&1 < /dev/null &
  echo $! > "$PIDS/$name"
}

# wait_for WHAT SECONDS CMD...: poll CMD until it succeeds.
wait_for() {
  local what=$1 secs=$2 i; shift 2
  for ((i = 0; i < secs * 5; i++)); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  die "$what not ready after ${secs}s (logs in $LOGS)"
}

free_port() {
  local p
  while :; do
    p=$((20000 + RANDOM % 12000))
    ss -Htln "sport = :$p" | grep -q . || { echo "$p"; return; }
  done
}

cert() { # cert NAME CN ORG SANS (SANS empty for a client certificate)
  local name=$1 cn=$2 org=$3 sans=$4 subj="/CN=$2" ext
  [[ -n "$org" ]] && subj="/O=$org/CN=$cn"
  ext="$PKI/$name.ext"
  if [[ -n "$sans" ]]; then
    printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=%s\n' "$sans" > "$ext"
  else
    printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' > "$ext"
  fi
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$PKI/$name.key" -subj "$subj" -out "$PKI/$name.csr" 2>/dev/null
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial -days 30 -extfile "$ext" -out "$PKI/$name.crt" 2>/dev/null
}

kubeconfig() { # kubeconfig NAME: a kubeconfig with the client certificate NAME
  cat > "$STATE/$1.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: watchdog-cluster
  cluster:
    server: https://$BRIDGE_IP:$API_PORT
    certificate-authority: $PKI/ca.crt
users:
- name: $1
  user:
    client-certificate: $PKI/$1.crt
    client-key: $PKI/$1.key
contexts:
- name: watchdog-cluster
  context: {cluster: watchdog-cluster, user: $1}
current-context: watchdog-cluster
EOF
}

up() {
  local t0=$SECONDS
  [[ -f "$PIDS/kube-apiserver" ]] && die "already running (state in $STATE); run hack/cluster.sh down first"
  # Everything that might fail without side effects first.
  local cp nodebin helm
  cp="$("$ROOT/hack/control-plane.sh")" || die "hack/control-plane.sh failed"
  nodebin="$("$ROOT/hack/node.sh")" || die "hack/node.sh failed"
  local missing=()
  command -v containerd >/dev/null || missing+=(containerd)
  command -v runc >/dev/null || missing+=(runc)
  [[ -x /usr/lib/cni/bridge ]] || missing+=(containernetworking-plugins)
  command -v openssl >/dev/null || missing+=(openssl)
  command -v iptables >/dev/null || missing+=(iptables)
  if ((${#missing[@]})); then
    log "installing ${missing[*]} (apt-get)"
    apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null || die "apt-get install ${missing[*]} failed"
  fi
  [[ -d /sys/fs/cgroup/memory ]] || die "this node runs on cgroups v1 (hybrid): /sys/fs/cgroup/memory is not mounted"
  local node
  node="$(hostname)"
  [[ "$(getent ahostsv4 "$node" | awk 'NR==1{print $1}')" == 127.* ]] || node=localhost

  rm -rf "$STATE"
  mkdir -p "$STATE" "$LOGS" "$PIDS" "$STATE/bin"
  # A failed or interrupted start stops what it started.
  trap 'rc=$?; trap - EXIT; if ((rc)); then log "start failed (exit $rc): stopping what started"; down; fi; exit $rc' EXIT
  trap 'exit 130' INT TERM

  # The network first: the unreachable route before anything can send to the range.
  ip route replace unreachable "$RANGE"
  sysctls_save
  ls -1d /run/netns/cni-* > "$STATE/netns.before" 2>/dev/null || true
  kubelet_chain_save
  [[ -e /run/containerd ]] || touch "$STATE/run-containerd.created"
  ip link add "$BRIDGE" type bridge
  ip addr add "$BRIDGE_IP/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up

  cp "$cp/kube-apiserver" "$cp/etcd" "$cp/kubectl" "$nodebin"/* "$STATE/bin/"
  log "building the registry and image tool and the scheduler stand-in"
  (cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -o "$STATE/bin/release" ./hack/release \
    && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$STATE/bin/schedsim" ./hack/schedsim)

  # ---- PKI and ServiceAccount signing keys
  PKI="$STATE/pki"; mkdir -p "$PKI"
  openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$PKI/ca.key" -out "$PKI/ca.crt" -days 30 -subj "/CN=watchdog-cluster-ca" 2>/dev/null
  cert apiserver kube-apiserver "" "IP:$BRIDGE_IP,IP:$KUBERNETES_SERVICE_IP,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  cert admin watchdog-cluster-admin system:masters ""
  cert kube-controller-manager system:kube-controller-manager "" ""
  cert kube-scheduler system:kube-scheduler "" ""
  cert kubelet "system:node:$node" system:nodes ""
  cert kube-proxy system:kube-proxy "" ""
  openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
  openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
  local c; for c in admin kube-controller-manager kube-scheduler kubelet kube-proxy; do kubeconfig "$c"; done

  # ---- registry on loopback, and the images every pod needs
  start registry "$STATE/bin/release" registry --addr 127.0.0.1:0 --addr-file "$STATE/registry.addr"
  wait_for registry 20 test -s "$STATE/registry.addr"
  REGISTRY="$(cat "$STATE/registry.addr")"
  "$STATE/bin/release" binary-image --binary "$STATE/bin/schedsim" --cmd pause --ref "$REGISTRY/watchdog-cluster/pause:v1" --insecure >/dev/null
  "$STATE/bin/release" binary-image --binary "$STATE/bin/schedsim" --cmd scheduler --ref "$REGISTRY/agentenv/scheduler-sim:v1" --insecure >/dev/null

  # ---- etcd and kube-apiserver
  local etcd_client etcd_peer
  etcd_client="$(free_port)"; etcd_peer="$(free_port)"
  start etcd "$STATE/bin/etcd" --data-dir "$STATE/etcd" --name watchdog-cluster \
    --listen-client-urls "http://127.0.0.1:$etcd_client" --advertise-client-urls "http://127.0.0.1:$etcd_client" \
    --listen-peer-urls "http://127.0.0.1:$etcd_peer" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
    --initial-cluster "watchdog-cluster=http://127.0.0.1:$etcd_peer" --unsafe-no-fsync --quota-backend-bytes 1073741824
  wait_for etcd 30 curl -sf "http://127.0.0.1:$etcd_client/health"
  start kube-apiserver "$STATE/bin/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$etcd_client" \
    --bind-address "$BRIDGE_IP" --advertise-address "$BRIDGE_IP" --secure-port "$API_PORT" \
    --service-cluster-ip-range "$SERVICE_CIDR" \
    --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" --client-ca-file "$PKI/ca.crt" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
    --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
    --kubelet-preferred-address-types Hostname --allow-privileged=false --profiling=false --v 1
  wait_for kube-apiserver 60 "$STATE/bin/kubectl" --kubeconfig "$STATE/admin.kubeconfig" get --raw /readyz

  # ---- controllers
  start kube-controller-manager "$STATE/bin/kube-controller-manager" --kubeconfig "$STATE/kube-controller-manager.kubeconfig" \
    --authentication-kubeconfig "$STATE/kube-controller-manager.kubeconfig" --authorization-kubeconfig "$STATE/kube-controller-manager.kubeconfig" \
    --bind-address 127.0.0.1 --leader-elect=false --use-service-account-credentials \
    --root-ca-file "$PKI/ca.crt" --service-account-private-key-file "$PKI/sa.key" --profiling=false --v 1
  start kube-scheduler "$STATE/bin/kube-scheduler" --kubeconfig "$STATE/kube-scheduler.kubeconfig" \
    --authentication-kubeconfig "$STATE/kube-scheduler.kubeconfig" --authorization-kubeconfig "$STATE/kube-scheduler.kubeconfig" \
    --bind-address 127.0.0.1 --leader-elect=false --profiling=false --v 1

  # ---- containerd: its own root, state and socket; images only from the loopback registry
  local CD="$STATE/containerd"
  mkdir -p "$CD/certs.d/$REGISTRY" "$STATE/cni/net.d" "$STATE/cni/ipam"
  cat > "$CD/certs.d/$REGISTRY/hosts.toml" <<EOF
server = "http://$REGISTRY"
[host."http://$REGISTRY"]
  capabilities = ["pull", "resolve"]
EOF
  # Any other registry: a loopback port nothing listens on, so nothing is pulled from outside.
  local h; for h in _default docker.io registry.k8s.io ghcr.io quay.io gcr.io; do
    mkdir -p "$CD/certs.d/$h"
    printf 'server = "http://127.0.0.1:1"\n[host."http://127.0.0.1:1"]\n  capabilities = ["pull", "resolve"]\n' > "$CD/certs.d/$h/hosts.toml"
  done
  cat > "$CD/config.toml" <<EOF
version = 2
root = "$CD/root"
state = "$CD/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "$CD/containerd.sock"
[ttrpc]
  address = "$CD/containerd-ttrpc.sock"
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$CD/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$REGISTRY/watchdog-cluster/pause:v1"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  # Root here lacks CAP_SYS_RESOURCE: without this every sandbox fails in runc.
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$STATE/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$CD/certs.d"
EOF
  # The pod network: the bridge made above, no gateway, no masquerade, no ip_forward;
  # the Service range routed to the bridge address, where kube-proxy's DNAT applies.
  cat > "$STATE/cni/net.d/10-watchdog-cluster.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "watchdog-cluster",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": false,
      "isDefaultGateway": false,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$STATE/cni/ipam",
        "ranges": [[{"subnet": "$POD_CIDR", "rangeStart": "198.19.0.10", "rangeEnd": "198.19.0.250"}]],
        "routes": [{"dst": "$SERVICE_CIDR", "gw": "$BRIDGE_IP"}, {"dst": "$BRIDGE_IP/32"}]
      }
    },
    {"type": "loopback"}
  ]
}
EOF
  start containerd containerd --config "$CD/config.toml"
  wait_for containerd 30 test -S "$CD/containerd.sock"

  # ---- kubelet: cgroupfs under our own cgroup root, sysctls it changes saved above
  local hier
  for hier in /sys/fs/cgroup/*/; do
    [[ "$hier" == */unified/ ]] && continue
    mkdir -p "$hier$CGROUP_ROOT"
  done
  # A new cpuset has no CPUs and no memory nodes until given its parent's.
  if [[ -d /sys/fs/cgroup/cpuset/$CGROUP_ROOT ]]; then
    cat /sys/fs/cgroup/cpuset/cpuset.cpus > "/sys/fs/cgroup/cpuset/$CGROUP_ROOT/cpuset.cpus"
    cat /sys/fs/cgroup/cpuset/cpuset.mems > "/sys/fs/cgroup/cpuset/$CGROUP_ROOT/cpuset.mems"
  fi
  echo "nameserver 127.0.0.1" > "$STATE/resolv.conf" # pods resolve nothing off the machine
  cat > "$STATE/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
# The API server reaches this kubelet on 127.0.0.1 (logs, exec) without a client
# certificate; nothing off the machine can reach it.
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
cgroupRoot: /$CGROUP_ROOT
failCgroupV1: false
failSwapOn: false
oomScoreAdj: 0
makeIPTablesUtilChains: false
containerRuntimeEndpoint: unix://$CD/containerd.sock
podLogsDir: $STATE/pod-logs
resolvConf: $STATE/resolv.conf
rotateCertificates: false
serverTLSBootstrap: false
maxPods: 30
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
EOF
  start kubelet "$STATE/bin/kubelet" --config "$STATE/kubelet.yaml" --kubeconfig "$STATE/kubelet.kubeconfig" \
    --root-dir "$STATE/kubelet" --cert-dir "$STATE/kubelet/pki" --hostname-override "$node" --node-ip "$BRIDGE_IP" --v 1
  # ---- kube-proxy, iptables mode; conntrack sysctls left alone
  cat > "$STATE/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: {kubeconfig: $STATE/kube-proxy.kubeconfig}
hostnameOverride: $node
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
clusterCIDR: $POD_CIDR
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
iptables: {localhostNodePorts: false}
nodePortAddresses: ["$BRIDGE_IP/32"]
EOF
  start kube-proxy "$STATE/bin/kube-proxy" --config "$STATE/kube-proxy.yaml" --v 1

  local K=("$STATE/bin/kubectl" --kubeconfig "$STATE/admin.kubeconfig")
  wait_for "node $node Ready" 90 bash -c "'${K[0]}' --kubeconfig '$STATE/admin.kubeconfig' get node '$node' -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -qx True"
  wait_for "the default ServiceAccount" 60 "${K[@]}" -n default get serviceaccount default
  wait_for "kube-root-ca.crt" 60 "${K[@]}" -n default get configmap kube-root-ca.crt

  cat > "$STATE/env" <<EOF
KUBECONFIG=$STATE/admin.kubeconfig
WATCHDOG_REGISTRY=$REGISTRY
WATCHDOG_CLUSTER_BIN=$STATE/bin
WATCHDOG_CLUSTER_NODE=$node
WATCHDOG_CLUSTER_LOGS=$LOGS
WATCHDOG_CLUSTER_HOST_IP=$BRIDGE_IP
EOF
  trap - EXIT INT TERM
  log "up in $((SECONDS - t0))s: node $node, API server https://$BRIDGE_IP:$API_PORT, registry $REGISTRY"
  log "  export \$(hack/cluster.sh env)   # KUBECONFIG and the registry; hack/cluster.sh down to stop"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  env) [[ -f "$STATE/env" ]] || die "not running (no $STATE/env)"; cat "$STATE/env" ;;
  *) echo "usage: hack/cluster.sh up|down|env" >&2; exit 2 ;;
esac
