#!/usr/bin/env bash
# Every benchmark and soak that BENCHMARKS.md and RELIABILITY.md cite, each in its few-second
# smoke mode on a debug build, so that none of their commands can rot unseen (`.ci/run` runs
# this). A smoke run proves the command still works end to end (and the scripts' own checks:
# no failed create, no wrong answer, 0 differences from Gatekeeper's engine, no orphan); the
# figures it prints mean nothing.
#
# Every step runs on the build `cargo test --workspace --all-targets` makes (hack/lib/bins.sh), the
# one the tests use: `-p` or `cargo run` would resolve features anew and compile the dependencies
# again. Each step prints its wall time, and the last lines give them all.
#
#   hack/bench-smoke.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. hack/lib/stages.sh
. hack/lib/bins.sh
stages_begin "bench smoke"

stage "criterion benches, each benchmark once (cargo bench's test mode)"
cargo test --workspace --locked -q --benches
stage "the soaks, in the background (hack/soak.sh --smoke, then with --workspaces)"
# They mostly wait out their minutes of load and faults, so they run beside the steps below, one
# after the other; their output is printed when they are waited for, at the end.
soak_log=$(mktemp)
(
  set -e
  echo "== hack/soak.sh --smoke"
  hack/soak.sh --smoke
  echo "== hack/soak.sh --smoke --workspaces"
  hack/soak.sh --smoke --workspaces
) >"$soak_log" 2>&1 &
soak_pid=$!
# The start-time benchmark on the real node (as root) waits on its pulls and launches too: beside
# them, on the node nothing else uses here.
real_log=$(mktemp)
hack/bench-workspaces-start.sh --smoke --real-nodes >"$real_log" 2>&1 &
real_pid=$!
trap 'kill "$soak_pid" "$real_pid" 2>/dev/null || true; rm -f "$soak_log" "$real_log"' EXIT
echo "started (output printed at the end)"
stage "the load generator against outfit serve and a ceiling server"
SMOKE=1 build_bins
"$BIN_DIR/outfit-loadgen" --seconds 1 --connections 4 --policies 50
stage hack/bench-webhook-e2e.sh --smoke
hack/bench-webhook-e2e.sh --smoke
stage hack/bench-gatekeeper.sh --smoke
hack/bench-gatekeeper.sh --smoke
stage hack/memory-10k/run.sh --smoke
hack/memory-10k/run.sh --smoke
stage hack/bench-workspaces.sh --smoke
hack/bench-workspaces.sh --smoke
stage hack/bench-workspaces-scale.sh --smoke
hack/bench-workspaces-scale.sh --smoke
stage hack/bench-workspaces-start.sh --smoke
hack/bench-workspaces-start.sh --smoke
stage hack/serve-huge-patch.py --smoke
hack/serve-huge-patch.py --smoke
stage hack/workspaces-attack.sh --smoke
hack/workspaces-attack.sh --smoke
stage hack/bench-proxy.sh --smoke
hack/bench-proxy.sh --smoke
stage "the soaks and the start-time benchmark on the real node: waiting for them"
soak_status=0
wait "$soak_pid" || soak_status=$?
real_status=0
wait "$real_pid" || real_status=$?
trap 'rm -f "$soak_log" "$real_log"' EXIT
echo "== hack/bench-workspaces-start.sh --smoke --real-nodes"
cat "$real_log"
[ "$real_status" = 0 ] || { echo "hack/bench-workspaces-start.sh --smoke --real-nodes failed (status $real_status)" >&2; exit 1; }
cat "$soak_log"
[ "$soak_status" = 0 ] || { echo "a soak's smoke run failed (status $soak_status; its output is above)" >&2; exit 1; }
stages_end
printf '\nbench smoke: every script ran\n'
