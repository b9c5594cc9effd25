#!/usr/bin/env bash
# The project's test command (README's, and .ci/run's test step): on a machine with only Rust and
# Go it installs what the tests need, builds the test cluster and Helm, runs the tests and closes
# with "tests: N passed, N failed", the total over every test binary.
#
# usage: hack/test.sh [CARGO TEST ARGS...]   (default: --workspace --locked --no-fail-fast: every test
#   binary runs, so the closing total counts them all)
#   hack/test.sh -p outfit --test integration helm   runs only what matches, same preparation
#
# What it installs, when missing (Debian packages, with apt-get; as root or through sudo):
#   openssl, curl, setsid (util-linux), ss (iproute2)  the control plane's scripts (up.sh)
#   jq                                                  up.sh's node mode
#   python3                                             the deic-dk compatibility client
#   chromium, chromedriver, python3-selenium            the web page's browser test (Selenium
#                                                       for Debian's /usr/bin/python3)
# What it builds from the Go module proxy, into ${OUTFIT_CACHE_DIR:-~/.cache/outfit} (once per
# version; later runs take a second):
#   kube-apiserver, etcd, kube-controller-manager, kube-scheduler, kwok,
#   the external-snapshotter's snapshot-controller and CRDs              hack/control-plane/build.sh
#   helm                                                                 hack/helm/build.sh
# KUBERNETES_VERSION=1.33.13 hack/test.sh ... runs against another Kubernetes release (see
# hack/e2e-version.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { echo "[test] $*" >&2; }

for toolchain in cargo go; do
  command -v "$toolchain" >/dev/null || { log "error: $toolchain is not installed (the tests need Rust and Go)"; exit 2; }
done

missing=()
for tool in openssl curl setsid ss jq python3 chromium chromedriver; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
/usr/bin/python3 -c 'import selenium' 2>/dev/null || missing+=(python3-selenium)
if [ ${#missing[@]} -gt 0 ]; then
  log "installing the tools the tests use: ${missing[*]}"
  command -v apt-get >/dev/null || { log "error: missing ${missing[*]}, and no apt-get to install them: install them, then run this again"; exit 2; }
  sudo=()
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { log "error: missing ${missing[*]} and not root (no sudo) to install them"; exit 2; }
    sudo=(sudo)
  fi
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    openssl curl util-linux iproute2 jq python3 python3-selenium chromium chromium-driver >/dev/null
fi

log "the test cluster (kube-apiserver, etcd, controller manager, scheduler, kwok; built from Go modules, cached)"
hack/control-plane/build.sh
log "helm, for the chart's tests (built from its Go module, cached)"
hack/helm/build.sh >/dev/null

[ $# -gt 0 ] || set -- --workspace --locked --no-fail-fast
log "cargo test $*"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
status=0
cargo test "$@" 2>&1 | tee "$out" || status=$?
# cargo's last line is the doc-test summary of the last crate (often "0 passed"); close with the
# total over every test binary so the run is judged by all of them.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed/) p += $(i-1); if ($i ~ /^failed/) f += $(i-1) } }
     END { printf "tests: %d passed, %d failed\n", p, f; if (p == 0) exit 1 }' "$out" || [ "$status" != 0 ] || status=1
exit "$status"
