# Sourced by the benchmark and soak scripts: builds outfit and the load generators, and sets
# BIN_DIR to where they are.
#
# A script's --smoke (its first argument) runs it for a few seconds on a debug build: the one
# `cargo test --workspace --all-targets` makes, which `.ci/run` builds once for the tests and
# every smoke run (hack/bench-smoke.sh), so that none of the commands BENCHMARKS.md and
# RELIABILITY.md cite can rot and none compiles anything again. Building a few packages with
# `-p` instead would resolve the dependencies' features anew and compile them again. The figures
# a smoke run prints mean nothing. Without --smoke, the named packages are built in release mode.
#
#   . hack/lib/bins.sh; build_bins [-p PACKAGE]...  (default: -p outfit -p outfit-loadgen)
build_bins() {
  local root
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
  if [ "${SMOKE:-0}" = 1 ]; then
    (cd "$root" && cargo test --workspace --all-targets --locked -q --no-run)
    BIN_DIR="${CARGO_TARGET_DIR:-$root/target}/debug"
    return
  fi
  local packages=("$@")
  [ ${#packages[@]} -gt 0 ] || packages=(-p outfit -p outfit-loadgen)
  (cd "$root" && cargo build --locked -q --release "${packages[@]}")
  BIN_DIR="${CARGO_TARGET_DIR:-$root/target}/release"
}

# take_smoke "$@": sets SMOKE=1 when the first argument is --smoke; the caller then shifts it off.
take_smoke() {
  SMOKE=0
  if [ "${1:-}" = --smoke ]; then SMOKE=1; fi
}
