#!/usr/bin/env bash
# Build Helm from its Go module (helm.sh/helm/v4, through the Go module proxy only; no release
# tarball, no install script) into a version-keyed cache directory, and print the binary's path:
#
#   ${OUTFIT_CACHE_DIR:-$HOME/.cache/outfit}/helm/helm-<version>/bin/helm
#
# Nothing is built when that binary exists (pass --force to rebuild). HELM_VERSION in the
# environment overrides the pin below. The chart's tests (tests/integration/helm.rs) call this.
#
# usage: hack/helm/build.sh [--force]
set -euo pipefail

# The Helm release the chart is tested with; its go.mod needs Go 1.26 (no replace directives, so
# a plain `go install` of the module builds it).
HELM_VERSION="${HELM_VERSION:-4.3.1}"
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
[[ "$HELM_VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "HELM_VERSION=$HELM_VERSION: expected a release number such as 4.3.1"

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
# The version Helm prints is stamped as its Makefile stamps it.
GOBIN="$stage" nice -n 10 go install -trimpath \
  -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=v$HELM_VERSION -X helm.sh/helm/v4/internal/version.gitTreeState=clean" \
  "helm.sh/helm/v4/cmd/helm@v$HELM_VERSION" \
  || die "go install helm.sh/helm/v4/cmd/helm@v$HELM_VERSION failed"
version=$("$stage/helm" version --template '{{.Version}}')
[ "$version" = "v$HELM_VERSION" ] || die "the built helm reports $version, expected v$HELM_VERSION"
rm -rf "$bin_dir"
mv "$stage" "$bin_dir"
log "helm v$HELM_VERSION built in $(( $(date +%s) - start )) s"
printf '%s\n' "$helm"
