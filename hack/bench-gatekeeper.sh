#!/usr/bin/env bash
# outfit's Gatekeeper engine against Gatekeeper's own (v3.23.1, built from the Go module proxy),
# in one run: builds both, then prints µs per object for N = 10, 100, 1,000, 10,000 mutators and
# three mixes, the ratio, and the differential result (every input admitted by both and compared).
#
#   hack/bench-gatekeeper.sh [--smoke] [gatekeeper-compare flags: --quick, --sizes 10,100,
#                             --mixes a,c, --workloads env, --budget-ms 500, --plot FILE, ...]
#
# --smoke: N = 10 and 100 with 20 ms budgets on a debug build, to show the script, both engines
# and the differential check still run (hack/lib/bins.sh); its timings mean nothing.
#
# The Go baseline is cached under ${OUTFIT_CACHE_DIR:-$HOME/.cache/outfit}/gatekeeper-baseline
# (hack/gatekeeper-baseline/build.sh); the Rust binary is built in release mode in
# ${CARGO_TARGET_DIR:-target}. Full run: about 12 minutes on 2 cores once built, most of it
# Gatekeeper at N=10,000 (one call there takes minutes); --quick stops at N=1,000 with 300 ms
# budgets. On a shared machine, note `cat /proc/loadavg` (printed before and after).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$root/hack/lib/bins.sh"
take_smoke "$@"
smoke_flags=()
if [ "$SMOKE" = 1 ]; then
  shift
  smoke_flags=(--sizes 10,100 --budget-ms 20)
fi
baseline="$("$root/hack/gatekeeper-baseline/build.sh")"
build_bins -p outfit-loadgen --bin gatekeeper-compare
printf '[bench-gatekeeper] load average before: %s\n' "$(cut -d' ' -f1-3 /proc/loadavg)" >&2
exec "$BIN_DIR/gatekeeper-compare" --baseline "$baseline" "${smoke_flags[@]}" "$@"
