#!/usr/bin/env bash
# Build a real kube-apiserver and etcd from Go modules (no Docker, no downloads
# other than the Go module proxy) into a version-keyed cache directory:
#
#   ${OUTFIT_CACHE_DIR:-$HOME/.cache/outfit}/control-plane/k8s-<ver>-etcd-<ver>/bin/{kube-apiserver,etcd}
#
# Versions are pinned in versions.env. Nothing is rebuilt when both binaries
# already exist for the pinned versions (pass --force to rebuild).
#
# usage: build.sh [--force] [--print-bin-dir]
set -euo pipefail

# shellcheck source=hack/control-plane/lib.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

force=0
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    --print-bin-dir) printf '%s\n' "$CP_BIN_DIR"; exit 0 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) cp_die "unknown argument: $arg" ;;
  esac
done

if [ "$force" = 0 ] && cp_binaries_present; then
  cp_log "binaries present in $CP_BIN_DIR (k8s v$KUBERNETES_VERSION, etcd v$ETCD_VERSION); nothing to build"
  exit 0
fi

command -v go >/dev/null || cp_die "go is not installed"

# Never download a toolchain, never pick up a go.work, build static binaries.
# GOMODCACHE / GOCACHE are left at their (persistent) defaults unless the
# caller sets them.
export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0
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

k8s_minor="${KUBERNETES_VERSION#*.}"; k8s_minor="${k8s_minor%%.*}"   # 1.34.4 -> 34
staging_version="v0.${KUBERNETES_VERSION#*.}"                       # 1.34.4 -> v0.34.4
src_root="$CP_VERSION_DIR/src"
stage="$CP_VERSION_DIR/bin.tmp.$$"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$src_root" "$stage"

t_all=$(cp_now_ms)
cp_log "building kube-apiserver v$KUBERNETES_VERSION and etcd v$ETCD_VERSION ($(go version | cut -d' ' -f3), $(nproc) cores)"
cp_log "  GOMODCACHE=$(go env GOMODCACHE) GOCACHE=$(go env GOCACHE)"

# ---------------------------------------------------------------- kube-apiserver
# Wrapper module: require k8s.io/kubernetes and map every staging module that
# upstream's go.mod replaces with ./staging/src/... to the published v0.X.Y.
t=$(cp_now_ms)
mod="$src_root/kube-apiserver"
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
  go mod init outfit.local/tools/kube-apiserver >/dev/null 2>&1
  go mod edit -go="$go_line"
  if [ -n "$godebug_line" ]; then go mod edit -godebug="$godebug_line"; fi
  # Resolve each staging module's version: the v0.X.Y tag, or failing that the
  # pseudo-version behind the kubernetes-1.X.Y tag (the ".0 release" case).
  dl="$(go mod download -json "${staging[@]/%/@$staging_version}" 2>/dev/null || true)"
  for m in "${staging[@]}"; do
    v="$staging_version"
    if ! printf '%s\n' "$dl" | grep -q "\"Path\": \"$m\",\$" \
       || printf '%s\n' "$dl" | sed -n "/\"Path\": \"$m\",\$/,/^}/p" | grep -q '"Error"'; then
      v="$(go mod download -json "$m@kubernetes-$KUBERNETES_VERSION" | sed -n 's/^[[:space:]]*"Version": "\(.*\)",\{0,1\}$/\1/p')"
      [ -n "$v" ] || cp_die "no version of $m for Kubernetes $KUBERNETES_VERSION on the proxy"
      cp_log "  $m: $staging_version missing, using $v (tag kubernetes-$KUBERNETES_VERSION)"
    fi
    go mod edit -replace="$m=$m@$v"
  done
  go get -tool "k8s.io/kubernetes/cmd/kube-apiserver@v$KUBERNETES_VERSION"
)
cp_log "  kube-apiserver wrapper module resolved and downloaded in $(cp_elapsed "$t")"

t=$(cp_now_ms)
pkg_ver="k8s.io/component-base/version"
cg_ver="k8s.io/client-go/pkg/version"
ldflags="-s -w"
for p in "$pkg_ver" "$cg_ver"; do
  ldflags+=" -X $p.gitVersion=v$KUBERNETES_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$k8s_minor -X $p.gitTreeState=clean"
done
(
  cd "$mod"
  "${TIMEV[@]}" "${NICE[@]}" go build -trimpath -ldflags "$ldflags" -o "$stage/kube-apiserver" \
    k8s.io/kubernetes/cmd/kube-apiserver
)
cp_log "  kube-apiserver compiled in $(cp_elapsed "$t")"

# ---------------------------------------------------------------- etcd
# Separate wrapper so MVS reproduces exactly etcd's own dependency versions.
t=$(cp_now_ms)
mod="$src_root/etcd"
rm -rf "$mod"; mkdir -p "$mod"
(
  cd "$mod"
  go mod init outfit.local/tools/etcd >/dev/null 2>&1
  go get -tool "go.etcd.io/etcd/server/v3@v$ETCD_VERSION"
)
cp_log "  etcd wrapper module resolved and downloaded in $(cp_elapsed "$t")"
t=$(cp_now_ms)
(
  cd "$mod"
  "${TIMEV[@]}" "${NICE[@]}" go build -trimpath -ldflags "-s -w" -o "$stage/etcd" go.etcd.io/etcd/server/v3
)
cp_log "  etcd compiled in $(cp_elapsed "$t")"

# ---------------------------------------------------------------- check + install
"$stage/kube-apiserver" --version | grep -qx "Kubernetes v$KUBERNETES_VERSION" \
  || cp_die "kube-apiserver reports '$("$stage/kube-apiserver" --version)', expected v$KUBERNETES_VERSION"
"$stage/etcd" --version | grep -qx "etcd Version: $ETCD_VERSION" \
  || cp_die "etcd reports '$("$stage/etcd" --version | head -1)', expected $ETCD_VERSION"

rm -rf "$CP_BIN_DIR"
mv "$stage" "$CP_BIN_DIR"
cp_log "done in $(cp_elapsed "$t_all"):"
ls -l "$CP_BIN_DIR" >&2
