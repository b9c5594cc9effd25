#!/usr/bin/env bash
# outfit's Gatekeeper engine against Gatekeeper's own (v3.23.1, built from the Go module proxy),
# in one run: builds both, then prints µs per object for N = 10, 100, 1,000, 10,000 mutators and
# three mixes, the ratio, and the differential result (every input admitted by both and compared).
#
#   hack/bench-gatekeeper.sh [gatekeeper-compare flags: --quick, --sizes 10,100, --mixes a,c,
#                             --workloads env, --budget-ms 500, --plot FILE, --dump DIR, ...]
#
# The Go baseline is cached under ${OUTFIT_CACHE_DIR:-$HOME/.cache/outfit}/gatekeeper-baseline
# (hack/gatekeeper-baseline/build.sh); the Rust binary is built in release mode in
# ${CARGO_TARGET_DIR:-target}. Full run: about 12 minutes on 2 cores once built, most of it
# Gatekeeper at N=10,000 (one call there takes minutes); --quick stops at N=1,000 with 300 ms
# budgets. On a shared machine, note `cat /proc/loadavg` (printed before and after).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
baseline="$("$root/hack/gatekeeper-baseline/build.sh")"
(cd "$root" && cargo build --release --locked -q -p outfit-loadgen --bin gatekeeper-compare)
target_dir="${CARGO_TARGET_DIR:-$root/target}"
printf '[bench-gatekeeper] load average before: %s\n' "$(cut -d' ' -f1-3 /proc/loadavg)" >&2
exec "$target_dir/release/gatekeeper-compare" --baseline "$baseline" "$@"
