#!/usr/bin/env bash
# cargo's runner for the test binaries in hack/test.sh (CARGO_TARGET_<host>_RUNNER): runs each with
# libtest's --report-time, so every test's result line carries its wall time and the slowest can
# be named. The flag is unstable; stable libtest takes it when RUSTC_BOOTSTRAP is set in its own
# environment, which is all this sets: nothing is compiled with it (cargo runs the runner, not
# rustc), and no test starts cargo or rustc.
#
#   hack/lib/test-runner.sh TEST_BINARY [ARGS...]
set -euo pipefail
binary=$1
shift
for arg in "$@"; do
  # Listing tests (IDEs, `cargo test -- --list`) prints no results to time.
  [ "$arg" != --list ] || exec "$binary" "$@"
done
RUSTC_BOOTSTRAP=1 exec "$binary" "$@" -Z unstable-options --report-time
