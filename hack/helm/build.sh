#!/usr/bin/env bash
# Build Helm from its Go module (helm.sh/helm/v4, through the Go module proxy only; no release
# tarball, no install script) into a version-keyed cache directory, and print the binary's path:
#
#   ${OUTFIT_CACHE_DIR:-$HOME/.cache/outfit}/helm/helm-<version>/bin/helm
#
# Nothing is built when that binary exists (pass --force to rebuild). HELM_VERSION in the
# environment overrides the pin in hack/control-plane/versions.env. The chart's tests
# (tests/integration/helm.rs) call this.
#
# usage: hack/helm/build.sh [--force]
set -euo pipefail

# The Helm release the chart is tested with (HELM_VERSION in hack/control-plane/versions.env; its
# go.mod needs Go 1.26), and the test cluster's paths: Helm is built aligned to its Kubernetes.
# shellcheck source-path=SCRIPTDIR source=../control-plane/lib.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../control-plane/lib.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/go-align.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/go-align.sh"
log() { printf '[helm] %s\n' "$*" >&2; }
die() { printf '[helm] ERROR: %s\n' "$*" >&2; exit 1; }

force=0
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) die "unknown argument: $arg" ;;
  esac
done

cache_root="${OUTFIT_CACHE_DIR:-$HOME/.cache/outfit}/helm"
bin_dir="$cache_root/helm-$HELM_VERSION/bin"
helm="$bin_dir/helm"
built() { [ -x "$helm" ] && "$helm" version --template '{{.Version}}' 2>/dev/null | grep -qx "v$HELM_VERSION"; }
if [ "$force" = 0 ] && built; then
  printf '%s\n' "$helm"
  exit 0
fi

command -v go >/dev/null || die "go is not installed"
# Never download a toolchain, never pick up a go.work, build a static binary.
export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0
# No DWARF from the compiler: the binaries are stripped at link (-ldflags -s -w) anyway, and
# generating it took a tenth of the compile time (etcd: 112 CPU-s instead of 125).
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-gcflags=all=-dwarf=false"
mkdir -p "$cache_root"
# One build at a time (test binaries and shells running side by side).
exec 9>"$cache_root/.build.lock"
flock 9
if [ "$force" = 0 ] && built; then
  printf '%s\n' "$helm"
  exit 0
fi

stage="$cache_root/helm-$HELM_VERSION/bin.tmp.$$"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage"
start=$(date +%s)
log "building helm v$HELM_VERSION from helm.sh/helm/v4 ($(go version | cut -d' ' -f3), $(nproc) cores)"
# A wrapper module, as `go install helm.sh/helm/v4/cmd/helm@v...` would resolve it, so that its
# modules can be raised to the test cluster's Kubernetes' (hack/lib/go-align.sh): the packages
# both use then come from Go's build cache.
mod="$cache_root/helm-$HELM_VERSION/src/helm"
go_tool_module "$mod" helm "helm.sh/helm/v4/cmd/helm@v$HELM_VERSION" \
  || die "go get helm.sh/helm/v4/cmd/helm@v$HELM_VERSION failed (log: $mod/go-get.log)"
# The version Helm prints is stamped as its Makefile stamps it.
GO_BUILD_WRAP=(nice -n 10)
go_aligned_build "$CP_VERSION_DIR/src/kubernetes" "$mod" helm -trimpath \
  -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=v$HELM_VERSION -X helm.sh/helm/v4/internal/version.gitTreeState=clean" \
  -o "$stage/helm" helm.sh/helm/v4/cmd/helm \
  || die "building helm.sh/helm/v4/cmd/helm@v$HELM_VERSION failed"
version=$("$stage/helm" version --template '{{.Version}}')
[ "$version" = "v$HELM_VERSION" ] || die "the built helm reports $version, expected v$HELM_VERSION"
rm -rf "$bin_dir"
mv "$stage" "$bin_dir"
log "helm v$HELM_VERSION built in $(( $(date +%s) - start )) s"
printf '%s\n' "$helm"
