#!/usr/bin/env bash
# Build outfit's container image without a container daemon: a static (musl) release binary,
# then an OCI image archive (a tar of an OCI image layout) written by oci.py: one layer with the
# binary as entrypoint, Debian's CA bundle and a non-root user (65532), no shell, no base image.
#
# usage: hack/image/build.sh [--out PATH] [--binary PATH]
#   --out PATH     the archive (default target/image/outfit.tar)
#   --binary PATH  package this static binary instead of building one
#
# The image reference is the one `outfit manifests` names by default (outfit-k8s's
# InstallOptions), read from the built binary, so the image and the install manifests agree.
# Push it with skopeo (see docs/install.md, "The container image"):
#   skopeo copy oci-archive:target/image/outfit.tar docker://ghcr.io/outfit-dev/outfit:0.1.0
#
# CARGO_TARGET_DIR defaults to target/image, apart from the development build so neither waits
# for the other's lock. SOURCE_DATE_EPOCH (default: the last commit's time) is every timestamp in
# the image: the same commit, toolchain and CA bundle give the same digest.
# Installs what is missing: the musl target (rustup), musl-gcc (musl-tools), the CA bundle.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"

target=x86_64-unknown-linux-musl
out=target/image/outfit.tar
binary=
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --binary) binary=$2; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "build.sh: unknown argument: $1" >&2; exit 2 ;;
  esac
done
log() { echo "[image] $*" >&2; }

ca_bundle=/etc/ssl/certs/ca-certificates.crt
apt_missing=()
[ -s "$ca_bundle" ] || apt_missing+=(ca-certificates)
if [ -z "$binary" ]; then
  # musl rather than glibc's static-pie: a static glibc cannot load the NSS modules its
  # getaddrinfo needs, so host names (the API server's, manifest URLs) would not resolve.
  command -v musl-gcc >/dev/null || apt_missing+=(musl-tools) # ring and mimalloc compile C
fi
if [ ${#apt_missing[@]} -gt 0 ]; then
  log "installing: ${apt_missing[*]}"
  apt-get update -qq && apt-get install -y -qq "${apt_missing[@]}" >/dev/null
fi

if [ -z "$binary" ]; then
  rustup target list --installed | grep -qx "$target" || rustup target add "$target"
  export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target/image}"
  log "cargo build --release --target $target -p outfit (CARGO_TARGET_DIR=$CARGO_TARGET_DIR)"
  start=$SECONDS
  cargo build --release --locked --target "$target" -p outfit
  log "built in $((SECONDS - start)) s"
  binary="$CARGO_TARGET_DIR/$target/release/outfit"
fi

# A dynamic binary would start nowhere in an image without a libc: refuse it here.
if LC_ALL=C readelf -l "$binary" | grep -q 'Requesting program interpreter'; then
  echo "build.sh: $binary is dynamically linked; the image has no libc" >&2
  exit 1
fi

version=$("$binary" --version | awk '{print $2}')
ref=$("$binary" manifests --workspaces | awk '$1 == "image:" { print $2; exit }')
if [ "${ref##*:}" != "$version" ]; then
  echo "build.sh: outfit $version names the image $ref; expected the tag $version" >&2
  exit 1
fi

cargo_field() { sed -n "s/^$1 = \"\(.*\)\"$/\1/p" "$2" | head -n 1; }
revision=unknown
created=${SOURCE_DATE_EPOCH:-0}
if git rev-parse --git-dir >/dev/null 2>&1; then
  revision=$(git rev-parse HEAD)
  # GIT_OPTIONAL_LOCKS=0: look, without refreshing the index.
  [ -z "$(GIT_OPTIONAL_LOCKS=0 git status --porcelain --untracked-files=no)" ] || revision="$revision-dirty"
  created=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}
fi

mkdir -p "$(dirname "$out")"
digest=$(python3 hack/image/oci.py --binary "$binary" --ca-bundle "$ca_bundle" --ref "$ref" \
  --created "$created" --out "$out" \
  --label org.opencontainers.image.title=outfit \
  --label "org.opencontainers.image.description=$(cargo_field description crates/outfit/Cargo.toml)" \
  --label "org.opencontainers.image.version=$version" \
  --label "org.opencontainers.image.revision=$revision" \
  --label "org.opencontainers.image.created=$(date -u -d "@$created" +%Y-%m-%dT%H:%M:%SZ)" \
  --label "org.opencontainers.image.source=$(cargo_field repository Cargo.toml)" \
  --label "org.opencontainers.image.licenses=$(cargo_field license Cargo.toml)")

log "$out: $ref, $digest, $(du -h "$out" | cut -f1) (binary $(du -h "$binary" | cut -f1))"
printf '%s@%s\n' "$ref" "$digest"
