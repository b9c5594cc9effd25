#!/usr/bin/env bash
# What outfit costs a pod create, end to end through a real kube-apiserver: pod creates per second
# and p50/p99/max latency with outfit as the mutating webhook (7 realistic policies, then 1,000)
# and with no webhook. Builds the release binaries first (CARGO_TARGET_DIR is honoured), starts its
# own control plane with hack/control-plane/up.sh --nodes 0 and stops it at the end. Exit status 1
# on any failed create or unmutated pod. See crates/outfit-loadgen/src/bin/webhook-e2e/main.rs.
#
#   hack/bench-webhook-e2e.sh [--smoke] [--clients 8] [--seconds 20] [--warmup 2]
#                             [--many-policies 1000] [--verify 200] [--state-dir DIR] [--work DIR]
#
# --smoke: a few seconds on a debug build, to show the script still runs (hack/lib/bins.sh).
#
# The machine's load average and the time are printed before and after: the figures depend on
# what else runs there.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. hack/lib/bins.sh
take_smoke "$@"
smoke_flags=()
if [ "$SMOKE" = 1 ]; then
  shift
  smoke_flags=(--clients 2 --seconds 2 --warmup 0.5 --many-policies 50 --verify 10)
fi
build_bins
echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); nproc: $(nproc); load average: $(cat /proc/loadavg)"
status=0
"$BIN_DIR/webhook-e2e" "${smoke_flags[@]}" "$@" || status=$?
echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); load average: $(cat /proc/loadavg)"
exit "$status"
