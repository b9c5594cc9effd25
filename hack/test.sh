#!/usr/bin/env bash
# The project's test command (README's, and .ci/run's test step): on a machine with only Rust and
# Go it installs what the tests need, builds the test cluster and Helm, runs the tests and closes
# with "tests: N passed, N failed", the total over every test binary.
#
# usage: hack/test.sh [CARGO TEST ARGS...]   (default: --workspace --locked --no-fail-fast: every test
#   binary runs, so the closing total counts them all)
#   hack/test.sh --workspace --test integration helm   runs only what matches, same preparation and
#   the same build as the full run (with -p PACKAGE, cargo resolves the dependencies' features for
#   that package alone and compiles them again)
#
# First it runs hack/prepare.sh: the Debian packages the tests use (openssl, curl, jq, python3,
# chromium, chromedriver, ...) when missing, and the test cluster and Helm, built from the Go
# module proxy into ${OUTFIT_CACHE_DIR:-~/.cache/outfit} (once per version; later runs take a
# second).
#
# Each test's wall time is printed beside its result, and the slowest ten at the end
# (hack/lib/test-runner.sh).
#
# KUBERNETES_VERSION=1.33.13 hack/test.sh ... runs against another Kubernetes release (see
# hack/e2e-version.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { echo "[test] $*" >&2; }

hack/prepare.sh

# The page's pure modules (the API client, the event-stream reader, the rows' decisions) have
# unit tests of their own, in node's test runner (Node 20 is on every machine; no npm packages).
# They take a second, so they run first: a broken page fails the run before the long cargo build.
# The shell names the files: node 20 takes a folder, later versions take patterns, all take files.
log "node --test crates/outfit-workspaces/src/web/test/*.test.js"
node --test crates/outfit-workspaces/src/web/test/*.test.js

[ $# -gt 0 ] || set -- --workspace --locked --no-fail-fast
# Four tests at a time in each test binary: the end-to-end tests spend much of their time waiting
# on their clusters. On 2 cores the integration binary took 486 s with two at a time, 281 s with
# four (with ring and rustls optimised in the debug build, Cargo.toml), 259 s with six, where a
# home restored from a snapshot missed its create deadline. A RUST_TEST_THREADS of the caller's
# wins.
export RUST_TEST_THREADS="${RUST_TEST_THREADS:-4}"
log "cargo test $*"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
status=0
# cargo runs each test binary through the runner, which asks libtest for every test's time.
host=$(rustc -vV | sed -n 's/^host: //p')
runner_var="CARGO_TARGET_$(printf '%s' "$host" | tr 'a-z.-' 'A-Z__')_RUNNER"
env "$runner_var=$PWD/hack/lib/test-runner.sh" cargo test "$@" 2>&1 | tee "$out" || status=$?
echo "the slowest tests:"
# awk, not head, keeps the first ten: head would close the pipe early, and sort, still writing,
# would die of SIGPIPE and fail this script under pipefail (exit 141) however the tests went.
sed -n 's/^test \(.*\) \.\.\. \([a-zA-Z]*\) <\([0-9.]*\)s>$/\3 \1 (\2)/p' "$out" | sort -rn \
  | awk 'NR <= 10 { printf "%9.1f s  %s %s\n", $1, $2, $3 }'
# cargo's last line is the doc-test summary of the last crate (often "0 passed"); close with the
# total over every test binary so the run is judged by all of them.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed/) p += $(i-1); if ($i ~ /^failed/) f += $(i-1) } }
     END { printf "tests: %d passed, %d failed\n", p, f; if (p == 0) exit 1 }' "$out" || [ "$status" != 0 ] || status=1
exit "$status"
