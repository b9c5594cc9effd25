#!/usr/bin/env bash
# Build a real kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy, etcd
# and kwok from Go modules (no Docker, no downloads other than the Go module
# proxy) into a version-keyed cache directory:
#
#   ${OUTFIT_CACHE_DIR:-$HOME/.cache/outfit}/control-plane/k8s-<ver>-etcd-<ver>-kwok-<ver>/bin/
#     {kube-apiserver,kube-controller-manager,kube-scheduler,kubelet,kube-proxy,etcd,kwok,kwok-crds/,kwok-stages/}
#
# the real node's image registry (tests/tools/registry) into .../control-plane/registry-<go.mod's hash>/bin/,
# its CSI driver's node side (tests/tools/csi-node) into .../control-plane/csi-node-<its hash>/bin/,
# its containerd and runc into .../control-plane/containerd-<ver>-runc-<ver>/bin/,
# the jupyterlab image's venv (JupyterLab from PyPI) into .../control-plane/jupyterlab-<lock's hash>/venv,
#
# and the external-snapshotter's snapshot-controller with its CRDs (node mode)
# into a directory of their own, keyed by their version only:
#
#   .../control-plane/external-snapshotter-<ver>/bin/{snapshot-controller,snapshot-crds/}
#
# Versions are pinned in versions.env. Nothing is rebuilt when all binaries
# already exist for the pinned versions (pass --force to rebuild).
#
# usage: build.sh [--force] [--print-bin-dir]
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

force=0
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    --print-bin-dir) printf '%s\n' "$CP_BIN_DIR"; exit 0 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) cp_die "unknown argument: $arg" ;;
  esac
done

if [ "$force" = 0 ] && cp_binaries_present; then
  cp_log "binaries present in $CP_BIN_DIR (k8s v$KUBERNETES_VERSION, etcd v$ETCD_VERSION, kwok v$KWOK_VERSION) and $CP_SNAPSHOTTER_BIN_DIR (external-snapshotter v$EXTERNAL_SNAPSHOTTER_VERSION); nothing to build"
  exit 0
fi

command -v go >/dev/null || cp_die "go is not installed"

# Never download a toolchain, never pick up a go.work, build static binaries.
# GOMODCACHE / GOCACHE are left at their (persistent) defaults unless the
# caller sets them.
export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0
# No DWARF from the compiler: the binaries are stripped at link (-ldflags -s -w) anyway, and
# generating it took a tenth of the compile time (etcd: 112 CPU-s instead of 125).
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-gcflags=all=-dwarf=false"
# Under `set -e` a failing build must not leave half a cache dir behind.
mkdir -p "$CP_CACHE_ROOT"

# One build at a time per cache root (parallel test runs, two shells, ...).
exec 9>"$CP_CACHE_ROOT/.build.lock"
if ! flock -n 9; then
  cp_log "another build holds $CP_CACHE_ROOT/.build.lock; waiting"
  flock 9
fi
if [ "$force" = 0 ] && cp_binaries_present; then
  cp_log "binaries appeared while waiting for the lock; nothing to build"
  exit 0
fi

NICE=(nice -n 10)
TIMEV=()
if [ -x /usr/bin/time ]; then
  # GNU time: report wall clock and peak RSS of the build.
  TIMEV=(/usr/bin/time -f '[control-plane]   wall %es, user %Us, sys %Ss, peak RSS %MKB')
fi

# cp_reports BINARY TEXT [-x]: dies unless `BINARY --version` prints TEXT (with -x, as a whole
# line). The output is read whole
# before it is searched: `--version | grep -q` let grep close the pipe at its first match, and a
# binary that then wrote its next line died of SIGPIPE, failing the check under pipefail although
# the version was right (etcd, whose version is followed by its Git SHA and Go version).
cp_reports() {
  local reported
  reported="$("$1" --version 2>&1)" || cp_die "$1 --version failed: $reported"
  grep -qF ${3:-} -- "$2" <<<"$reported" || cp_die "$1 reports '${reported%%$'\n'*}', expected $2"
}

# ---------------------------------------------------------------- external-snapshotter
# snapshot-controller (VolumeSnapshot <-> VolumeSnapshotContent binding, dynamic provisioning of
# contents, deletion) from github.com/kubernetes-csi/external-snapshotter/v8, and the three
# snapshot.storage.k8s.io CRDs from its client/v8 module of the same tag (the main module's zip
# leaves the nested client module out). Upstream's go.mod replaces client/v8 with ./client, which
# a wrapper ignores, so the wrapper requires the published client/v8 of the same tag instead.
build_snapshotter() {
  local t mod client_dir f   # stage_s global: the EXIT trap reads it
  t=$(cp_now_ms)
  mod="$CP_SNAPSHOTTER_DIR/src/external-snapshotter"
  stage_s="$CP_SNAPSHOTTER_DIR/bin.tmp.$$"
  rm -rf "$mod" "$stage_s"; mkdir -p "$mod" "$stage_s/snapshot-crds"
  trap 'rm -rf "$stage_s"' EXIT
  cp_log "building snapshot-controller v$EXTERNAL_SNAPSHOTTER_VERSION (external-snapshotter)"
  (
    cd "$mod"
    go mod init outfit.local/tools/external-snapshotter >/dev/null 2>&1
    { go get "github.com/kubernetes-csi/external-snapshotter/client/v8@v$EXTERNAL_SNAPSHOTTER_VERSION" \
      && go get -tool "github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller@v$EXTERNAL_SNAPSHOTTER_VERSION"
    } >go-get.log 2>&1 \
      || { tail -n 30 go-get.log >&2; cp_die "go get external-snapshotter v$EXTERNAL_SNAPSHOTTER_VERSION failed (log: $mod/go-get.log)"; }
    client_dir="$(go list -m -f '{{.Dir}}' github.com/kubernetes-csi/external-snapshotter/client/v8)"
    for f in volumesnapshotclasses volumesnapshotcontents volumesnapshots; do
      install -m 644 "$client_dir/config/crd/snapshot.storage.k8s.io_$f.yaml" "$stage_s/snapshot-crds/" \
        || cp_die "snapshot CRDs not found in $client_dir/config/crd"
    done
  )
  cp_log "  external-snapshotter wrapper module resolved and downloaded in $(cp_elapsed "$t")"
  t=$(cp_now_ms)
  GO_BUILD_WRAP=("${TIMEV[@]}" "${NICE[@]}")
  go_aligned_build "$CP_VERSION_DIR/src/kubernetes" "$mod" snapshot-controller -trimpath \
    -ldflags "-s -w -X main.version=v$EXTERNAL_SNAPSHOTTER_VERSION" \
    -o "$stage_s/snapshot-controller" github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller
  cp_reports "$stage_s/snapshot-controller" "v$EXTERNAL_SNAPSHOTTER_VERSION"
  rm -rf "$CP_SNAPSHOTTER_BIN_DIR"
  mv "$stage_s" "$CP_SNAPSHOTTER_BIN_DIR"
  cp_log "  snapshot-controller compiled in $(cp_elapsed "$t")"
}
# shellcheck source-path=SCRIPTDIR source=../lib/go-align.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/go-align.sh"

# ---------------------------------------------------------------- the project's own tools
# build_project_tool NAME BINARY: tests/tools/NAME (go.mod, go.sum, main.go) into BINARY, copied
# into the cache beside it so that aligning it to Kubernetes' modules leaves the checked-in go.mod
# alone. The real node's image registry (the Distribution project's registry with the filesystem
# storage only) and its CSI driver's node side.
build_project_tool() {
  local name=$1 binary=$2 t mod
  t=$(cp_now_ms)
  mod="$(dirname "$(dirname "$binary")")/src"
  rm -rf "$mod"; mkdir -p "$mod" "$(dirname "$binary")"
  cp "$CP_HERE/../../tests/tools/$name/"{go.mod,go.sum,main.go} "$mod/"
  cp_log "building $name (tests/tools/$name)"
  GO_BUILD_WRAP=("${TIMEV[@]}" "${NICE[@]}")
  go_aligned_build "$CP_VERSION_DIR/src/kubernetes" "$mod" "$name" -trimpath -ldflags "-s -w" \
    -o "$binary.tmp" .
  mv "$binary.tmp" "$binary"
  cp_log "  $name compiled in $(cp_elapsed "$t")"
}

# ---------------------------------------------------------------- containerd 2 and runc
# The real node's runtime: containerd (with its runc shim and ctr), aligned to Kubernetes' modules
# (the CRI and client-go are shared), and runc, with cgo (its nsenter is C) and libseccomp (the
# RuntimeDefault seccomp profile pods ask for).
build_runtime() {
  local t mod stage_r cmd
  t=$(cp_now_ms)
  mod="$(dirname "$CP_RUNTIME_DIR")/src"
  stage_r="$(dirname "$CP_RUNTIME_DIR")/bin.tmp.$$"
  rm -rf "$stage_r"; mkdir -p "$stage_r"
  go_tool_module "$mod/containerd" containerd "github.com/containerd/containerd/v2/cmd/containerd@v$CONTAINERD_VERSION" \
    || cp_die "go get containerd v$CONTAINERD_VERSION failed (log: $mod/containerd/go-get.log)"
  cp_log "building containerd v$CONTAINERD_VERSION (containerd, containerd-shim-runc-v2, ctr) and runc v$RUNC_VERSION"
  GO_BUILD_WRAP=("${TIMEV[@]}" "${NICE[@]}")
  for cmd in containerd containerd-shim-runc-v2 ctr; do
    go_aligned_build "$CP_VERSION_DIR/src/kubernetes" "$mod/containerd" "$cmd" -trimpath \
      -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=v$CONTAINERD_VERSION" \
      -o "$stage_r/$cmd" "github.com/containerd/containerd/v2/cmd/$cmd"
  done
  go_tool_module "$mod/runc" runc "github.com/opencontainers/runc@v$RUNC_VERSION" \
    || cp_die "go get runc v$RUNC_VERSION failed (log: $mod/runc/go-get.log)"
  ( cd "$mod/runc" && CGO_ENABLED=1 "${GO_BUILD_WRAP[@]}" go build -tags seccomp -trimpath \
      -ldflags "-s -w -X main.version=$RUNC_VERSION" -o "$stage_r/runc" github.com/opencontainers/runc ) \
    || cp_die "building runc v$RUNC_VERSION failed (above; it needs gcc and libseccomp-dev)"
  cp_reports "$stage_r/containerd" "v$CONTAINERD_VERSION"
  cp_reports "$stage_r/runc" "runc version $RUNC_VERSION"
  rm -rf "$CP_RUNTIME_DIR"
  mv "$stage_r" "$CP_RUNTIME_DIR"
  cp_log "  containerd and runc compiled in $(cp_elapsed "$t")"
}

# ---------------------------------------------------------------- kube-router
# The real node's NetworkPolicy enforcement (real-node.sh runs its firewall alone).
build_kube_router() {
  local t mod
  t=$(cp_now_ms)
  mod="$(dirname "$(dirname "$CP_KUBE_ROUTER")")/src"
  mkdir -p "$(dirname "$CP_KUBE_ROUTER")"
  go_tool_module "$mod" kube-router "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@v$KUBE_ROUTER_VERSION" \
    || cp_die "go get kube-router v$KUBE_ROUTER_VERSION failed (log: $mod/go-get.log)"
  cp_log "building kube-router v$KUBE_ROUTER_VERSION"
  GO_BUILD_WRAP=("${TIMEV[@]}" "${NICE[@]}")
  go_aligned_build "$CP_VERSION_DIR/src/kubernetes" "$mod" kube-router -trimpath \
    -ldflags "-s -w -X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=v$KUBE_ROUTER_VERSION" \
    -o "$CP_KUBE_ROUTER.tmp" github.com/cloudnativelabs/kube-router/v2/cmd/kube-router
  mv "$CP_KUBE_ROUTER.tmp" "$CP_KUBE_ROUTER"
  cp_log "  kube-router compiled in $(cp_elapsed "$t")"
}

# The jupyterlab image's venv: Debian's python3.11 with JupyterLab from PyPI, by the hashes of its
# lock (tests/tools/node-images/jupyterlab.txt); the tests build the image from it.
build_jupyterlab_venv() {
  local t
  t=$(cp_now_ms)
  cp_log "making the jupyterlab image's venv (JupyterLab from PyPI, tests/tools/node-images/jupyterlab.txt)"
  [ "$force" = 0 ] || rm -rf "$CP_JUPYTERLAB_VENV"
  "${NICE[@]}" python3 "$CP_HERE/../../tests/tools/node-images/build.py" --jupyterlab-venv "$CP_JUPYTERLAB_VENV" \
    || cp_die "making the jupyterlab venv failed (above)"
  cp_log "  the jupyterlab venv made in $(cp_elapsed "$t")"
}

# The snapshot controller, the registry and kube-router are built after Kubernetes, aligned to its
# modules (below).
build_the_rest_if_missing() {
  if [ "$force" = 1 ] || ! cp_snapshotter_present; then
    build_snapshotter
  fi
  if [ "$force" = 1 ] || [ ! -x "$CP_REGISTRY" ]; then
    build_project_tool registry "$CP_REGISTRY"
  fi
  if [ "$force" = 1 ] || [ ! -x "$CP_KUBE_ROUTER" ]; then
    build_kube_router
  fi
  if [ "$force" = 1 ] || [ ! -x "$CP_CSI_NODE" ]; then
    build_project_tool csi-node "$CP_CSI_NODE"
  fi
  if [ "$force" = 1 ] || ! cp_runtime_present; then
    build_runtime
  fi
  if [ "$force" = 1 ] || [ ! -f "$CP_JUPYTERLAB_VENV/.outfit-lock" ]; then
    build_jupyterlab_venv
  fi
}
if [ "$force" = 0 ] && cp_kubernetes_present; then
  cp_log "the Kubernetes binaries are present in $CP_BIN_DIR"
  build_the_rest_if_missing
  exit 0
fi

k8s_minor="${KUBERNETES_VERSION#*.}"; k8s_minor="${k8s_minor%%.*}"   # 1.34.4 -> 34
staging_version="v0.${KUBERNETES_VERSION#*.}"                       # 1.34.4 -> v0.34.4
src_root="$CP_VERSION_DIR/src"
stage="$CP_VERSION_DIR/bin.tmp.$$"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$src_root" "$stage"

t_all=$(cp_now_ms)
cp_log "building kube-apiserver, kube-controller-manager, kube-scheduler, the kubelet and kube-proxy v$KUBERNETES_VERSION, etcd v$ETCD_VERSION and kwok v$KWOK_VERSION ($(go version | cut -d' ' -f3), $(nproc) cores)"
cp_log "  GOMODCACHE=$(go env GOMODCACHE) GOCACHE=$(go env GOCACHE)"

# ---------------------------------------------------------------- kubernetes
# Wrapper module: require k8s.io/kubernetes and map every staging module that
# upstream's go.mod replaces with ./staging/src/... to the published v0.X.Y.
# kube-apiserver, kube-controller-manager and kube-scheduler are tools of the
# same module, so they share one dependency graph and one compile cache.
k8s_cmds=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy)
t=$(cp_now_ms)
mod="$src_root/kubernetes"
rm -rf "$mod"; mkdir -p "$mod"
# Upstream go.mod through the module proxy (run outside any module).
upstream_json="$(cd "$src_root" && go mod download -json "k8s.io/kubernetes@v$KUBERNETES_VERSION")" \
  || cp_die "cannot fetch k8s.io/kubernetes@v$KUBERNETES_VERSION: $upstream_json"
upstream_gomod="$(printf '%s\n' "$upstream_json" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')"
[ -f "$upstream_gomod" ] || cp_die "could not locate upstream go.mod in: $upstream_json"
go_line="$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$upstream_gomod")"
godebug_line="$(sed -n 's/^godebug \(.*\)$/\1/p' "$upstream_gomod")"
mapfile -t staging < <(sed -n 's#^[[:space:]]*\(k8s\.io/[^[:space:]]*\) => \./staging/.*#\1#p' "$upstream_gomod")
[ "${#staging[@]}" -gt 0 ] || cp_die "no staging replace lines found in $upstream_gomod"
other_replaces="$(sed -n '/^replace (/,/^)/p' "$upstream_gomod" | grep '=>' | grep -v '=> \./staging/' || true)"
[ -z "$other_replaces" ] || cp_log "  WARNING: upstream has non-staging replaces (not copied): $other_replaces"
cp_log "  upstream go.mod: go $go_line, godebug '${godebug_line:-none}', ${#staging[@]} staging modules -> $staging_version"

(
  cd "$mod"
  go mod init outfit.local/tools/kubernetes >/dev/null 2>&1
  go mod edit -go="$go_line"
  if [ -n "$godebug_line" ]; then go mod edit -godebug="$godebug_line"; fi
  # Resolve each staging module's version: the published v0.X.Y tag or, if
  # the proxy lacks it, the pseudo-version behind the kubernetes-1.X.Y tag
  # (the ".0 release" case; not every proxy mirror answers that query).
  go mod download "${staging[@]/%/@$staging_version}" 2>/dev/null || true
  modcache="$(go env GOMODCACHE)"
  {
    printf '\n// Generated by hack/control-plane/build.sh from k8s.io/kubernetes@v%s go.mod.\nreplace (\n' "$KUBERNETES_VERSION"
    for m in "${staging[@]}"; do
      v="$staging_version"
      # k8s.io/* paths are lower-case, so the cache path needs no escaping.
      if [ ! -f "$modcache/cache/download/$m/@v/$v.mod" ]; then
        v="$( { go mod download -json "$m@kubernetes-$KUBERNETES_VERSION" 2>/dev/null || true; } \
             | sed -n 's/^[[:space:]]*"Version": "\(v[^"]*\)",\{0,1\}$/\1/p')"
        if [ -n "$v" ]; then
          cp_log "  $m: $staging_version not on the proxy, using $v (tag kubernetes-$KUBERNETES_VERSION)"
        else
          # Harmless unless kube-apiserver imports it: with module-graph
          # pruning Go never loads a staging module the build does not need.
          v="$staging_version"
          cp_log "  note: $m@$v is not on the module proxy (not needed by ${k8s_cmds[*]} unless 'go get' fails below)"
        fi
      fi
      printf '\t%s => %s %s\n' "$m" "$m" "$v"
    done
    printf ')\n'
  } >>go.mod
  tools=()
  for c in "${k8s_cmds[@]}"; do tools+=("k8s.io/kubernetes/cmd/$c@v$KUBERNETES_VERSION"); done
  go get -tool "${tools[@]}" >go-get.log 2>&1 \
    || { tail -n 30 go-get.log >&2; cp_die "go get k8s.io/kubernetes/cmd/{${k8s_cmds[*]}}@v$KUBERNETES_VERSION failed (log: $mod/go-get.log)"; }
)
cp_log "  kubernetes wrapper module resolved and downloaded in $(cp_elapsed "$t")"

t=$(cp_now_ms)
pkg_ver="k8s.io/component-base/version"
cg_ver="k8s.io/client-go/pkg/version"
ldflags="-s -w"
for p in "$pkg_ver" "$cg_ver"; do
  ldflags+=" -X $p.gitVersion=v$KUBERNETES_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$k8s_minor -X $p.gitTreeState=clean"
done
# The tools built beside Kubernetes from the same Go caches: for the pinned release (the one CI
# builds), Kubernetes' modules are raised to the newest version these require, so that each shared
# package is compiled once (hack/lib/go-align.sh; Helm is built by hack/helm/build.sh).
if [ "$KUBERNETES_VERSION" = "$(sed -n 's/^KUBERNETES_VERSION=//p' "$CP_HERE/versions.env")" ]; then
  go_raise_for "$mod" kubernetes \
    "github.com/kubernetes-csi/external-snapshotter/v8@v$EXTERNAL_SNAPSHOTTER_VERSION" \
    "github.com/kubernetes-csi/external-snapshotter/client/v8@v$EXTERNAL_SNAPSHOTTER_VERSION" \
    "sigs.k8s.io/kwok@v$KWOK_VERSION" \
    "helm.sh/helm/v4@v$HELM_VERSION"
fi
# One go build per binary (the second and third reuse most of the first's
# compiled packages from GOCACHE), so the log shows what each one costs.
build_kubernetes() {
  local c t
  for c in "${k8s_cmds[@]}"; do
    t=$(cp_now_ms)
    (
      cd "$mod"
      "${TIMEV[@]}" "${NICE[@]}" go build -mod=mod -trimpath -ldflags "$ldflags" -o "$stage/$c" \
        "k8s.io/kubernetes/cmd/$c"
    ) || return 1
    cp_log "  $c compiled in $(cp_elapsed "$t")"
  done
}
if ! build_kubernetes; then
  [ -f "$mod/go.mod.published" ] || cp_die "building Kubernetes v$KUBERNETES_VERSION failed (above)"
  cp_log "  Kubernetes does not build with the raised versions (above); building it as published"
  go_unraise "$mod"
  build_kubernetes || cp_die "building Kubernetes v$KUBERNETES_VERSION failed (above)"
fi

# ---------------------------------------------------------------- etcd
# Separate wrapper so MVS reproduces exactly etcd's own dependency versions.
t=$(cp_now_ms)
mod="$src_root/etcd"
go_tool_module "$mod" etcd "go.etcd.io/etcd/server/v3@v$ETCD_VERSION" \
  || cp_die "go get go.etcd.io/etcd/server/v3@v$ETCD_VERSION failed (log: $mod/go-get.log)"
cp_log "  etcd wrapper module resolved and downloaded in $(cp_elapsed "$t")"
t=$(cp_now_ms)
(
  cd "$mod"
  "${TIMEV[@]}" "${NICE[@]}" go build -trimpath -ldflags "-s -w" -o "$stage/etcd" go.etcd.io/etcd/server/v3
)
cp_log "  etcd compiled in $(cp_elapsed "$t")"

# ---------------------------------------------------------------- kwok
# kwok's go.mod has no replace directives, but a wrapper keeps the build in
# the cache dir and reproduces exactly kwok's own dependency versions (MVS
# with kwok as the only requirement). The CRDs (kwok.x-k8s.io Stage,
# ClusterExec, ...) and the stages ship in the module; up.sh uses them from
# bin/kwok-crds and bin/kwok-stages.
t=$(cp_now_ms)
mod="$src_root/kwok"
go_tool_module "$mod" kwok "sigs.k8s.io/kwok/cmd/kwok@v$KWOK_VERSION" \
  || cp_die "go get sigs.k8s.io/kwok/cmd/kwok@v$KWOK_VERSION failed (log: $mod/go-get.log)"
(
  cd "$mod"
  kwok_dir="$(go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)"
  mkdir -p "$stage/kwok-crds"
  for f in "$kwok_dir"/kustomize/crd/bases/*.yaml; do
    install -m 644 "$f" "$stage/kwok-crds/"
  done
  [ -s "$stage/kwok-crds/kwok.x-k8s.io_clusterexecs.yaml" ] \
    || cp_die "kwok CRDs not found in $kwok_dir/kustomize/crd/bases"
  # The standalone kwok binary has no built-in stages (it exits with "no
  # stages found"); kwokctl feeds it kustomize/stage/fast, so up.sh does too.
  mkdir -p "$stage/kwok-stages"
  for f in node/fast/node-initialize node/heartbeat-with-lease/node-heartbeat-with-lease \
           pod/fast/pod-ready pod/fast/pod-complete pod/fast/pod-delete; do
    install -m 644 "$kwok_dir/kustomize/stage/$f.yaml" "$stage/kwok-stages/"
  done
)
cp_log "  kwok wrapper module resolved and downloaded in $(cp_elapsed "$t")"
t=$(cp_now_ms)
# kwok shares most of its dependencies with Kubernetes: built with Kubernetes' versions where
# kwok's are older (hack/lib/go-align.sh), those come from Go's build cache.
GO_BUILD_WRAP=("${TIMEV[@]}" "${NICE[@]}")
go_aligned_build "$src_root/kubernetes" "$mod" kwok -trimpath \
  -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=v$KWOK_VERSION" \
  -o "$stage/kwok" sigs.k8s.io/kwok/cmd/kwok
cp_log "  kwok compiled in $(cp_elapsed "$t")"

# ---------------------------------------------------------------- check + install
for c in "${k8s_cmds[@]}"; do
  cp_reports "$stage/$c" "Kubernetes v$KUBERNETES_VERSION" -x
done
cp_reports "$stage/kwok" "$KWOK_VERSION"
cp_reports "$stage/etcd" "etcd Version: $ETCD_VERSION" -x

rm -rf "$CP_BIN_DIR"
mv "$stage" "$CP_BIN_DIR"
cp_log "done in $(cp_elapsed "$t_all"):"
ls -l "$CP_BIN_DIR" >&2
build_the_rest_if_missing
