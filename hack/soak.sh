#!/usr/bin/env bash
# Soak outfit under load and faults for --minutes N (default 10); see RELIABILITY.md. Builds the
# release binaries first (CARGO_TARGET_DIR is honoured), starts its own control plane with
# hack/control-plane/up.sh and stops it at the end. Exit status 1 on any failure.
#
#   hack/soak.sh [soak flags]               outfit serve --from-cluster: load, policy changes,
#                                           certificate rotation, kube-apiserver outages
#                                           (crates/outfit-loadgen/src/bin/soak.rs)
#   hack/soak.sh --workspaces [flags]       outfit workspaces: users launching and deleting
#                                           through kube-apiserver outages, then an orphan check
#                                           (crates/outfit-loadgen/src/bin/workspaces-soak/)
#
# --help after either lists its flags.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bin=soak
if [ "${1:-}" = --workspaces ]; then
  bin=workspaces-soak
  shift
fi
cargo build --release -q -p outfit -p outfit-loadgen
exec "${CARGO_TARGET_DIR:-target}/release/$bin" "$@"
