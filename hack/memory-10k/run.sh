#!/usr/bin/env bash
# outfit serve with 10,000 PodDefaults and 10,000 Gatekeeper Assigns (BENCHMARKS.md, "memory and
# reload"): generates the set, starts the release binary on loopback, prints the time to /readyz
# and the RSS, then drives it for 30 s, and for 40 s more while one policy file is rewritten every
# 2 s (each rewrite a full reload). Exit status 1 if any review is answered wrong.
#
#   hack/memory-10k/run.sh [--smoke] [OUTFIT]      (default: target/release/outfit, built first)
#
# --smoke: 200 + 200 policies, 3 s and 6 s of load, on a debug build, to show the script still
# runs (hack/lib/bins.sh); its figures mean nothing.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$here/../.."
. "$root/hack/lib/bins.sh"
take_smoke "$@"
per_file=1000 idle=5 load=30 reload=40
if [ "$SMOKE" = 1 ]; then
  shift
  per_file=20 idle=1 load=3 reload=6
fi
bin="${1:-}"
if [ -z "$bin" ]; then
  build_bins -p outfit
  bin="$BIN_DIR/outfit"
fi
work="$(mktemp -d)"
python3 "$here/generate.py" "$work/policies" "$per_file"
"$bin" serve --policies "$work/policies" --self-signed "$work/certs" --listen 127.0.0.1:18443 \
  --admin-listen 127.0.0.1:18080 --log warn > "$work/serve.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
start=$(date +%s.%N)
until curl -sf localhost:18080/readyz > /dev/null 2>&1; do
  kill -0 $pid 2>/dev/null || { tail "$work/serve.log"; exit 1; }
  sleep 0.1
done
echo "ready after $(awk -v a="$(date +%s.%N)" -v b="$start" 'BEGIN { printf "%.2f", a - b }') s; $(grep VmRSS /proc/$pid/status)"
sleep "$idle"
echo "idle: $(grep VmRSS /proc/$pid/status); load average $(cut -d' ' -f1-3 /proc/loadavg)"
python3 "$here/load.py" 18443 "$work/certs/ca.crt" "$load" 4 $pid
python3 "$here/load.py" 18443 "$work/certs/ca.crt" "$reload" 4 $pid "$work/policies/assigns-0.yaml"
curl -s localhost:18080/metrics | grep -E '^outfit_policy_reloads'
echo "load average $(cut -d' ' -f1-3 /proc/loadavg); work directory $work"
