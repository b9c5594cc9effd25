#!/usr/bin/env bash
# Start time with pulls planned ahead (BENCHMARKS.md, "Start time: pulls planned ahead"; issues 35
# and 41): builds the release binaries, starts a fresh node-mode cluster, runs workspaces-start
# on it and stops the cluster, however the run ends.
#
#   hack/bench-workspaces-start.sh [--smoke] [--real-nodes [--registry-mbps N]]
#       [workspaces-start flags: --arms none,everywhere,planner, --nodes 4, --add-nodes 2,
#       --entries 6, --launches 60, --users 30, --seconds 60, --warm-up 30, --bandwidth 180 (MB/s),
#       --latency-ms 1000, --size-scale 1, --timeout-create 20, --seed 1]
#
# A simulation by default: the cluster's kwok node is not used, the image kubelet stand-in makes
# the nodes of each arm and models their pulls (hack/control-plane/up.sh --nodes 1).
#
# --real-nodes: on the cluster's real node instead (up.sh --nodes 0 --real-nodes 1, as root): the
# catalogue's images are built at the table's sizes (times --size-scale, 0.05 unless given: 15 to
# 150 MB) and pulled for real from the node's registry, through a link of --registry-mbps MB/s in
# all (default 20), so that pulls cost what they do on a site; one node, none added.
#
# --smoke: 2 entries, 6 launches over 6 s, images a tenth of the size (a hundredth on the real
# node), on a debug build, to show the script still runs (hack/lib/bins.sh); with --real-nodes,
# 2 nodes (+1) otherwise; its figures mean nothing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. hack/lib/bins.sh
take_smoke "$@"
[ "$SMOKE" = 0 ] || shift
real=0
mbps=20
while [ $# -gt 0 ]; do
  case "$1" in
    --real-nodes) real=1; shift ;;
    --registry-mbps) mbps=$2; shift 2 ;;
    *) break ;;
  esac
done
flags=()
scale=1
[ "$real" = 0 ] || { flags=(--real-node); scale=0.05; }
if [ "$SMOKE" = 1 ]; then
  flags+=(--arms none,everywhere,planner --nodes 2 --add-nodes 1 --entries 2 --launches 6 --users 3
    --seconds 6 --warm-up 2 --latency-ms 200)
  scale=$([ "$real" = 0 ] && echo 0.1 || echo 0.01)
fi
flags+=(--size-scale "$scale")
build_bins
state="$(mktemp -d)"
trap 'hack/control-plane/down.sh "$state" >/dev/null 2>&1 || true; rm -rf "$state"' EXIT
if [ "$real" = 1 ]; then
  OUTFIT_CP_REGISTRY_MBPS=$mbps hack/control-plane/up.sh --nodes 0 --real-nodes 1 "$state"
else
  hack/control-plane/up.sh --nodes 1 "$state"
fi
echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); nproc: $(nproc); load average: $(cat /proc/loadavg)"
"$BIN_DIR/workspaces-start" --state-dir "$state" --outfit "$BIN_DIR/outfit" \
  --work "$state/work" "${flags[@]}" "$@"
echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); load average: $(cat /proc/loadavg)"
