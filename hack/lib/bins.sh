# Sourced by the benchmark and soak scripts: builds outfit and the load generators, and sets
# BIN_DIR to where they are.
#
# A script's --smoke (its first argument) runs it for a few seconds on a debug build, which
# shares the test build's artifacts: `.ci/run` runs every script that way (hack/bench-smoke.sh)
# so that none of the commands BENCHMARKS.md and RELIABILITY.md cite can rot. The figures a smoke
# run prints mean nothing.
#
#   . hack/lib/bins.sh; build_bins [--smoke] [-p PACKAGE]...  (default: -p outfit -p outfit-loadgen)
build_bins() {
  local profile=release
  if [ "${SMOKE:-0}" = 1 ]; then profile=dev; fi
  local packages=("$@")
  [ ${#packages[@]} -gt 0 ] || packages=(-p outfit -p outfit-loadgen)
  local root
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
  (cd "$root" && cargo build --locked -q --profile "$profile" "${packages[@]}")
  local dir=release
  [ "$profile" = dev ] && dir=debug
  BIN_DIR="${CARGO_TARGET_DIR:-$root/target}/$dir"
}

# take_smoke "$@": sets SMOKE=1 when the first argument is --smoke; the caller then shifts it off.
take_smoke() {
  SMOKE=0
  if [ "${1:-}" = --smoke ]; then SMOKE=1; fi
}
