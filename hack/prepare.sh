#!/usr/bin/env bash
# Installs and builds what the tests need besides outfit itself, on a machine with only Rust and
# Go: hack/test.sh runs it first, and .ci/run runs it in the background (with --benchmarks
# --fuzz) while outfit compiles, so the Go builds fill the cores the Rust build leaves idle.
# Everything is cached; a second run takes a second.
#
#   hack/prepare.sh [--benchmarks] [--fuzz]
#
# Always (Debian packages, with apt-get, as root or through sudo, when missing):
#   openssl, curl, setsid (util-linux), ss (iproute2)  the control plane's scripts (up.sh)
#   jq                                                  up.sh's node mode
#   python3                                             the deic-dk compatibility client
#   python3-venv                                        the jupyterlab image's venv
#   chromium, chromedriver, python3-selenium            the web page's browser test (Selenium
#                                                       for Debian's /usr/bin/python3)
#   runc, the CNI plugins, iptables, ipset,             the real node (hack/control-plane/
#   busybox-static, socat                               real-node.sh) and its images
#                                                       (tests/tools/node-images); socat carries
#                                                       the pods' API server address to it;
#                                                       Debian's runc (1.1) is the node's
#                                                       runtime handler without user namespaces
#   gcc, pkg-config, libseccomp-dev                     the real node's runc, built with cgo
#   dropbear-bin, openssh-client                        the ssh image's server and its test's client
# and from the Go module proxy, into ${OUTFIT_CACHE_DIR:-~/.cache/outfit} (once per version):
#   kube-apiserver, etcd, kube-controller-manager, kube-scheduler, kwok,
#   the external-snapshotter's snapshot-controller and CRDs,
#   the real node's kubelet, kube-proxy, containerd, runc, CSI driver,
#   registry and kube-router                                            hack/control-plane/build.sh
# and from PyPI: JupyterLab for the real node's jupyterlab image, in a venv of Debian's python3.11
#   (tests/tools/node-images/jupyterlab.txt)                            hack/control-plane/build.sh
#   helm                                                                 hack/helm/build.sh
#   zitadel/oidc's example provider, the sign-in tests' (Go's build cache) tests/tools/oidc-provider
# --benchmarks: Gatekeeper's engine for hack/bench-gatekeeper.sh        hack/gatekeeper-baseline/build.sh
# --fuzz: cargo-fuzz (from crates.io) and the nightly toolchain, for hack/fuzz.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { echo "[prepare $(date -u +%T)] $*" >&2; }

benchmarks=0
fuzz=0
for arg in "$@"; do
  case "$arg" in
    --benchmarks) benchmarks=1 ;;
    --fuzz) fuzz=1 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) log "error: unknown argument $arg"; exit 2 ;;
  esac
done

for toolchain in cargo go; do
  command -v "$toolchain" >/dev/null || { log "error: $toolchain is not installed (the tests need Rust and Go)"; exit 2; }
done

missing=()
packages=(openssl curl util-linux iproute2 jq python3 python3-venv python3-selenium chromium chromium-driver
          runc containernetworking-plugins iptables ipset busybox-static socat gcc pkg-config
          libseccomp-dev dropbear-bin openssh-client)
for tool in openssl curl setsid ss jq python3 chromium chromedriver runc iptables ipset socat; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
/usr/bin/python3 -c 'import selenium' 2>/dev/null || missing+=(python3-selenium)
/usr/bin/python3 -c 'import ensurepip' 2>/dev/null || missing+=(python3-venv)
[ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
# runc (built by hack/control-plane/build.sh) is cgo, with libseccomp.
command -v gcc >/dev/null || missing+=(gcc)
pkg-config --exists libseccomp 2>/dev/null || missing+=(libseccomp-dev)
# The ssh image's server, and the client its test logs in with.
[ -x /usr/sbin/dropbear ] || missing+=(dropbear-bin)
command -v ssh-keygen >/dev/null || missing+=(openssh-client)
# The node images are made of a static busybox (a dynamic one would need a libc in each image).
{ [ -x /bin/busybox ] && ! LC_ALL=C readelf -l /bin/busybox 2>/dev/null | grep -q 'program interpreter'; } \
  || missing+=(busybox-static)
if [ ${#missing[@]} -gt 0 ]; then
  log "installing the tools the tests use: ${missing[*]}"
  command -v apt-get >/dev/null || { log "error: missing ${missing[*]}, and no apt-get to install them: install them, then run this again"; exit 2; }
  sudo=()
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { log "error: missing ${missing[*]} and not root (no sudo) to install them"; exit 2; }
    sudo=(sudo)
  fi
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}" >/dev/null
fi

log "the test cluster (kube-apiserver, etcd, controller manager, scheduler, kwok, snapshot controller, the real node's kubelet, kube-proxy, containerd, runc, CSI driver, registry and kube-router; built from Go modules, cached; JupyterLab's venv from PyPI)"
hack/control-plane/build.sh
log "helm, for the chart's tests (built from its Go module, cached)"
hack/helm/build.sh >/dev/null
log "the OpenID provider of the sign-in tests (tests/tools/oidc-provider, from Go modules, into Go's cache)"
(cd tests/tools/oidc-provider && go build -o /dev/null .)
if [ "$benchmarks" = 1 ]; then
  log "Gatekeeper's engine, the oracle of hack/bench-gatekeeper.sh (built from Go modules, cached)"
  hack/gatekeeper-baseline/build.sh >/dev/null
fi
if [ "$fuzz" = 1 ]; then
  log "cargo-fuzz and the nightly toolchain, for hack/fuzz.sh"
  hack/fuzz.sh tools
fi
log "ready"
