#!/usr/bin/env bash
# Build gatekeeper-baseline (Gatekeeper's own mutation engine behind a small CLI; see main.go)
# from the Go module proxy into a cache directory keyed by the Gatekeeper version and a hash of
# this directory's sources, and print the binary's path on stdout:
#
#   ${OUTFIT_CACHE_DIR:-$HOME/.cache/outfit}/gatekeeper-baseline/gatekeeper-<ver>-<hash>/gatekeeper-baseline
#
# Nothing is rebuilt when that binary exists (pass --force to rebuild). The first build compiles
# Gatekeeper's dependency graph: a few minutes on 2 cores. Never shipped; used by
# hack/bench-gatekeeper.sh and outfit-loadgen's gatekeeper-compare.
#
# usage: build.sh [--force]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log() { printf '[gatekeeper-baseline] %s\n' "$*" >&2; }
die() { printf '[gatekeeper-baseline] ERROR: %s\n' "$*" >&2; exit 1; }

force=0
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) die "unknown argument: $arg" ;;
  esac
done

command -v go >/dev/null || die "go is not installed"

gk_version="$(sed -n 's#^[[:space:]]*github.com/open-policy-agent/gatekeeper/v3 \(v[^[:space:]]*\).*#\1#p' "$here/go.mod" | head -n 1)"
[ -n "$gk_version" ] || die "no github.com/open-policy-agent/gatekeeper/v3 requirement in $here/go.mod"
src_hash="$(cat "$here/go.mod" "$here/go.sum" "$here/main.go" | sha256sum | cut -c1-12)"
cache_root="${OUTFIT_CACHE_DIR:-$HOME/.cache/outfit}/gatekeeper-baseline"
out_dir="$cache_root/gatekeeper-$gk_version-$src_hash"
bin="$out_dir/gatekeeper-baseline"

if [ "$force" = 0 ] && [ -x "$bin" ]; then
  log "present: $bin (Gatekeeper $gk_version); nothing to build"
  printf '%s\n' "$bin"
  exit 0
fi

# Never download a toolchain or pick up a go.work; a static binary.
export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0
# No DWARF from the compiler: the binaries are stripped at link (-ldflags -s -w) anyway, and
# generating it took a tenth of the compile time (etcd: 112 CPU-s instead of 125).
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-gcflags=all=-dwarf=false"
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=mod"
mkdir -p "$cache_root"

# One build at a time per cache root.
exec 9>"$cache_root/.build.lock"
if ! flock -n 9; then
  log "another build holds $cache_root/.build.lock; waiting"
  flock 9
fi
if [ "$force" = 0 ] && [ -x "$bin" ]; then
  log "appeared while waiting for the lock: $bin"
  printf '%s\n' "$bin"
  exit 0
fi

stage="$cache_root/build.tmp.$$"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage"
start=$(date +%s)
log "building against github.com/open-policy-agent/gatekeeper/v3@$gk_version ($(go version | cut -d' ' -f3), $(nproc) cores; GOMODCACHE=$(go env GOMODCACHE))"
# With the test cluster built here (hack/control-plane/build.sh), its shared dependencies
# (client-go, apimachinery, controller-runtime's, otel, grpc, ...) are raised to the versions of
# its Kubernetes, whose compiled packages Go's cache then holds (hack/lib/go-align.sh): a few
# minutes less on a new machine. Gatekeeper's own packages, its mutation engine, are its own
# either way (the smoke run's check of 0 differences from outfit holds it to that); without the
# cluster, or if the raised build fails, Gatekeeper's dependencies are as it publishes them.
. "$here/../lib/go-align.sh"
reference="$(. "$here/../control-plane/lib.sh" && printf '%s' "$CP_VERSION_DIR/src/kubernetes")" || reference=""
mkdir -p "$stage/src"
cp "$here/go.mod" "$here/go.sum" "$here/main.go" "$stage/src/"
GO_BUILD_WRAP=(nice -n 10)
go_aligned_build "$reference" "$stage/src" gatekeeper-baseline -trimpath -ldflags "-s -w" \
  -o "$stage/gatekeeper-baseline" . || die "go build failed"
rm -rf "$stage/src"
built_version="$("$stage/gatekeeper-baseline" version)"
case "$built_version" in
  *" $gk_version") ;;
  *) die "the binary reports '$built_version', expected $gk_version" ;;
esac
rm -rf "$out_dir"
mv "$stage" "$out_dir"
# Builds of older sources are never used again.
find "$cache_root" -mindepth 1 -maxdepth 1 -type d -name 'gatekeeper-*' ! -name "$(basename "$out_dir")" \
  -exec rm -rf {} +
log "built in $(( $(date +%s) - start ))s: $bin"
printf '%s\n' "$bin"
