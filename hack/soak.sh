#!/usr/bin/env bash
# Soak outfit serve --from-cluster for --minutes N (default 10) under load, policy changes,
# certificate rotation and kube-apiserver outages; see crates/outfit-loadgen/src/bin/soak.rs and
# RELIABILITY.md. Builds the release binaries first (CARGO_TARGET_DIR is honoured), starts its own
# control plane with hack/control-plane/up.sh and stops it at the end. Exit status 1 on any failure.
#
# usage: hack/soak.sh [--minutes N] [--rate R] [other soak flags; --help lists them]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo build --release -q -p outfit -p outfit-loadgen
exec "${CARGO_TARGET_DIR:-target}/release/soak" "$@"
