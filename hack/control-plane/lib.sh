# shellcheck shell=bash
# Common helpers for hack/control-plane/*.sh. Source it; do not run it.

CP_HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# A version in the environment wins over the pin (hack/e2e-version.sh runs the suite against
# the oldest supported release this way); each version builds into its own cache directory.
cp_env_kubernetes="${KUBERNETES_VERSION:-}" cp_env_etcd="${ETCD_VERSION:-}" cp_env_kwok="${KWOK_VERSION:-}"
cp_env_snapshotter="${EXTERNAL_SNAPSHOTTER_VERSION:-}" cp_env_helm="${HELM_VERSION:-}"
cp_env_kube_router="${KUBE_ROUTER_VERSION:-}"
cp_env_containerd="${CONTAINERD_VERSION:-}" cp_env_runc="${RUNC_VERSION:-}"
# shellcheck source-path=SCRIPTDIR source=versions.env
. "$CP_HERE/versions.env"
KUBERNETES_VERSION="${cp_env_kubernetes:-$KUBERNETES_VERSION}"
ETCD_VERSION="${cp_env_etcd:-$ETCD_VERSION}"
KWOK_VERSION="${cp_env_kwok:-$KWOK_VERSION}"
EXTERNAL_SNAPSHOTTER_VERSION="${cp_env_snapshotter:-$EXTERNAL_SNAPSHOTTER_VERSION}"
HELM_VERSION="${cp_env_helm:-$HELM_VERSION}"
KUBE_ROUTER_VERSION="${cp_env_kube_router:-$KUBE_ROUTER_VERSION}"
CONTAINERD_VERSION="${cp_env_containerd:-$CONTAINERD_VERSION}"
RUNC_VERSION="${cp_env_runc:-$RUNC_VERSION}"
: "${KUBERNETES_VERSION:?not set in versions.env}"
: "${ETCD_VERSION:?not set in versions.env}"
: "${KWOK_VERSION:?not set in versions.env}"
: "${EXTERNAL_SNAPSHOTTER_VERSION:?not set in versions.env}"
: "${HELM_VERSION:?not set in versions.env}"
: "${KUBE_ROUTER_VERSION:?not set in versions.env}"
: "${CONTAINERD_VERSION:?not set in versions.env}"
: "${RUNC_VERSION:?not set in versions.env}"
# They name directories and module versions: release numbers only (1.37.2, not v1.37.2 or a path).
for cp_pin in "KUBERNETES_VERSION=$KUBERNETES_VERSION" "ETCD_VERSION=$ETCD_VERSION" "KWOK_VERSION=$KWOK_VERSION" \
              "EXTERNAL_SNAPSHOTTER_VERSION=$EXTERNAL_SNAPSHOTTER_VERSION" "HELM_VERSION=$HELM_VERSION" \
              "KUBE_ROUTER_VERSION=$KUBE_ROUTER_VERSION" "CONTAINERD_VERSION=$CONTAINERD_VERSION" \
              "RUNC_VERSION=$RUNC_VERSION"; do
  [[ "${cp_pin#*=}" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] \
    || { printf '[control-plane] ERROR: %s: expected a release number such as 1.37.2\n' "$cp_pin" >&2; exit 2; }
done
unset cp_pin cp_env_kubernetes cp_env_etcd cp_env_kwok cp_env_snapshotter cp_env_helm cp_env_kube_router \
  cp_env_containerd cp_env_runc

CP_CACHE_ROOT="${OUTFIT_CACHE_DIR:-$HOME/.cache/outfit}/control-plane"
CP_VERSION_DIR="$CP_CACHE_ROOT/k8s-${KUBERNETES_VERSION}-etcd-${ETCD_VERSION}-kwok-${KWOK_VERSION}"
CP_BIN_DIR="$CP_VERSION_DIR/bin"
CP_KUBE_APISERVER="$CP_BIN_DIR/kube-apiserver"
CP_KUBE_CONTROLLER_MANAGER="$CP_BIN_DIR/kube-controller-manager"
CP_KUBE_SCHEDULER="$CP_BIN_DIR/kube-scheduler"
CP_ETCD="$CP_BIN_DIR/etcd"
CP_KWOK="$CP_BIN_DIR/kwok"
# The real node's (real-node.sh): the kubelet of the same release, and the image registry
# (tests/tools/registry, the Distribution project's registry with the filesystem storage only).
CP_KUBELET="$CP_BIN_DIR/kubelet"
# kube-proxy (iptables mode): Services, and the API server's in-cluster address, for its pods.
CP_KUBE_PROXY="$CP_BIN_DIR/kube-proxy"
# The real node's container runtime: containerd 2 (with its runc shim and ctr) and runc, which run
# user namespaces.
CP_RUNTIME_DIR="$CP_CACHE_ROOT/containerd-${CONTAINERD_VERSION}-runc-${RUNC_VERSION}/bin"
CP_CONTAINERD="$CP_RUNTIME_DIR/containerd"
CP_CTR="$CP_RUNTIME_DIR/ctr"
CP_RUNC="$CP_RUNTIME_DIR/runc"
# The node side of the real node's CSI driver (tests/tools/csi-node), keyed by its source.
CP_CSI_NODE="$CP_CACHE_ROOT/csi-node-$(cat "$CP_HERE/../../tests/tools/csi-node/"{go.mod,main.go} | sha256sum | cut -c1-12)/bin/csi-node"
# The jupyterlab image's venv (tests/tools/node-images/jupyterlab.py), keyed by its lock of PyPI
# packages.
CP_JUPYTERLAB_VENV="$CP_CACHE_ROOT/jupyterlab-$(sha256sum "$CP_HERE/../../tests/tools/node-images/jupyterlab.txt" | cut -c1-12)/venv"
# kube-router, its firewall alone: the real node's NetworkPolicies enforced.
CP_KUBE_ROUTER="$CP_CACHE_ROOT/kube-router-${KUBE_ROUTER_VERSION}/bin/kube-router"
# Keyed by its go.mod, which pins the registry's version.
CP_REGISTRY="$CP_CACHE_ROOT/registry-$(sha256sum "$CP_HERE/../../tests/tools/registry/go.mod" | cut -c1-12)/bin/registry"
# kwok's CRDs (kwok.x-k8s.io) and its "fast" stages (node-initialize,
# node-heartbeat-with-lease, pod-ready, pod-complete, pod-delete), copied from
# the module by build.sh.
CP_KWOK_CRD_DIR="$CP_BIN_DIR/kwok-crds"
CP_KWOK_STAGE_DIR="$CP_BIN_DIR/kwok-stages"
# The external-snapshotter's snapshot-controller and its three snapshot.storage.k8s.io CRDs
# (VolumeSnapshotClass, VolumeSnapshotContent, VolumeSnapshot) for node mode. A cache directory of
# their own: they do not depend on the Kubernetes release, and a new pin rebuilds only them.
CP_SNAPSHOTTER_DIR="$CP_CACHE_ROOT/external-snapshotter-${EXTERNAL_SNAPSHOTTER_VERSION}"
CP_SNAPSHOTTER_BIN_DIR="$CP_SNAPSHOTTER_DIR/bin"
CP_SNAPSHOT_CONTROLLER="$CP_SNAPSHOTTER_BIN_DIR/snapshot-controller"
CP_SNAPSHOT_CRD_DIR="$CP_SNAPSHOTTER_BIN_DIR/snapshot-crds"

cp_log() { printf '[control-plane] %s\n' "$*" >&2; }
cp_die() { printf '[control-plane] ERROR: %s\n' "$*" >&2; exit 1; }

# Milliseconds since the epoch (GNU date).
cp_now_ms() { date +%s%3N; }

# cp_elapsed START_MS -> "12.345s"
cp_elapsed() {
  local d=$(( $(cp_now_ms) - $1 ))
  printf '%d.%03ds' $(( d / 1000 )) $(( d % 1000 ))
}

# cp_start_daemon PID_FILE LOG CMD...: CMD detached (in a session of its own, so it outlives the
# script), its output appended to LOG, its own pid (written before exec) in PID_FILE.
cp_start_daemon() {
  local pid_file=$1 log=$2 _
  shift 2
  rm -f "$pid_file"
  # shellcheck disable=SC2016 # $$ and $@ are for the inner bash
  setsid bash -c 'echo $$ >"$0"; exec "$@"' "$pid_file" "$@" </dev/null >>"$log" 2>&1 &
  for _ in $(seq 1 100); do
    [ -s "$pid_file" ] && return 0
    sleep 0.05
  done
  cp_die "$(basename "$pid_file" .pid) did not write its pid file"
}

# cp_running PID: alive and not a zombie (one that has exited waits for init to reap it, which
# on this VM can take seconds: kill -0 alone would count it alive).
cp_running() {
  local state
  state="$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$1/status" 2>/dev/null)" || return 1
  [ -n "$state" ] && [ "$state" != Z ]
}

cp_binaries_present() {
  cp_kubernetes_present && cp_snapshotter_present && [ -x "$CP_REGISTRY" ] && [ -x "$CP_KUBE_ROUTER" ] \
    && [ -x "$CP_CSI_NODE" ] && cp_runtime_present && [ -f "$CP_JUPYTERLAB_VENV/.outfit-lock" ]
}
cp_kubernetes_present() {
  [ -x "$CP_KUBE_APISERVER" ] && [ -x "$CP_KUBE_CONTROLLER_MANAGER" ] && [ -x "$CP_KUBE_SCHEDULER" ] \
    && [ -x "$CP_KUBELET" ] && [ -x "$CP_KUBE_PROXY" ] && [ -x "$CP_ETCD" ] && [ -x "$CP_KWOK" ] && [ -d "$CP_KWOK_CRD_DIR" ] && [ -d "$CP_KWOK_STAGE_DIR" ]
}
cp_runtime_present() {
  [ -x "$CP_CONTAINERD" ] && [ -x "$CP_RUNTIME_DIR/containerd-shim-runc-v2" ] && [ -x "$CP_CTR" ] && [ -x "$CP_RUNC" ]
}
cp_snapshotter_present() {
  [ -x "$CP_SNAPSHOT_CONTROLLER" ] && [ -s "$CP_SNAPSHOT_CRD_DIR/snapshot.storage.k8s.io_volumesnapshots.yaml" ]
}
