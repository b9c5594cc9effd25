#!/usr/bin/env bash
# Start time with pulls planned ahead, a simulation (BENCHMARKS.md, "Start time: pulls planned
# ahead (a simulation)"; issue 35): builds the release binaries, starts a fresh node-mode cluster
# (hack/control-plane/up.sh --nodes 1; its kwok node is not used: the image kubelet stand-in
# makes the nodes of each arm), runs workspaces-start on it and stops the cluster, however the
# run ends.
#
#   hack/bench-workspaces-start.sh [--smoke] [workspaces-start flags: --arms none,everywhere,planner,
#       --nodes 4, --add-nodes 2, --entries 6, --launches 60, --users 30, --seconds 60,
#       --warm-up 30, --bandwidth 180 (MB/s), --latency-ms 1000, --size-scale 1, --timeout-create 20,
#       --seed 1]
#
# --smoke: 2 nodes (+1), 2 entries, 6 launches over 6 s, images a tenth of the size, the arms
# none and everywhere, on a debug build, to show the script still runs (hack/lib/bins.sh); its
# figures mean nothing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. hack/lib/bins.sh
take_smoke "$@"
smoke_flags=()
if [ "$SMOKE" = 1 ]; then
  shift
  smoke_flags=(--arms none,everywhere,planner --nodes 2 --add-nodes 1 --entries 2 --launches 6 --users 3
    --seconds 6 --warm-up 2 --latency-ms 200 --size-scale 0.1)
fi
build_bins
state="$(mktemp -d)"
trap 'hack/control-plane/down.sh "$state" >/dev/null 2>&1 || true; rm -rf "$state"' EXIT
hack/control-plane/up.sh --nodes 1 "$state"
echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); nproc: $(nproc); load average: $(cat /proc/loadavg)"
"$BIN_DIR/workspaces-start" --state-dir "$state" --outfit "$BIN_DIR/outfit" \
  --work "$state/work" "${smoke_flags[@]}" "$@"
echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); load average: $(cat /proc/loadavg)"
