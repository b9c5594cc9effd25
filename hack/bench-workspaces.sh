#!/usr/bin/env bash
# The workspace backend's benchmark (BENCHMARKS.md, "Workspace backend"): builds the release
# binaries, starts a fresh cluster whose pods run (hack/control-plane/up.sh --nodes 2), runs
# workspaces-bench on it (create-to-ready with and without outfit, get_pods latency) and stops
# the cluster, however the run ends.
#
#   hack/bench-workspaces.sh [--smoke] [workspaces-bench flags: --creates 50, --parallel 10,
#                             --users 100, --pods-per-user 10, --requests 2000]
#
# --smoke: a handful of creates and requests on a debug build, to show the script still runs
# (hack/lib/bins.sh); its figures mean nothing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. hack/lib/bins.sh
take_smoke "$@"
smoke_flags=()
if [ "$SMOKE" = 1 ]; then
  shift
  smoke_flags=(--creates 4 --parallel 2 --users 4 --pods-per-user 2 --requests 40)
fi
build_bins
state="$(mktemp -d)"
trap 'hack/control-plane/down.sh "$state" >/dev/null 2>&1 || true; rm -rf "$state"' EXIT
hack/control-plane/up.sh --nodes 2 "$state"
echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); nproc: $(nproc); load average: $(cat /proc/loadavg)"
"$BIN_DIR/workspaces-bench" --state-dir "$state" --outfit "$BIN_DIR/outfit" "${smoke_flags[@]}" "$@"
echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); load average: $(cat /proc/loadavg)"
