#!/usr/bin/env bash
# The attacks of issue 26 on a running `outfit workspaces` (RELIABILITY.md, "Workspace backend
# under attack"): builds outfit (debug), starts a control plane (API server and etcd: the backend
# reviews tokens through it), a namespace and a backend on 127.0.0.1:18126, runs
# hack/workspaces-attack.py --check against it (exits 1 unless the backend held), and stops both,
# however the run ends.
#
#   hack/workspaces-attack.sh [--smoke] [workspaces-attack.py flags: --tokens 400, --slow 200,
#       --slow-seconds 40, --idle 2000]
#
# --smoke: 20 tokens of each size, 5 slow bodies against a bodyReadTimeout of 3 s, 50 idle
# connections: a few seconds, to show the script still runs; its figures mean nothing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. hack/lib/bins.sh
take_smoke "$@"
flags=(--slow-seconds 40)
body_timeout=30s
if [ "$SMOKE" = 1 ]; then
  shift
  flags=(--tokens 20 --slow 5 --slow-seconds 8 --idle 50)
  body_timeout=3s
fi
# Always a debug build, as the figures in RELIABILITY.md were taken.
SMOKE=1 build_bins -p outfit
state="$(mktemp -d)"
backend=""
cleanup() {
  [ -z "$backend" ] || kill "$backend" 2>/dev/null || true
  hack/control-plane/down.sh "$state/cp" >/dev/null 2>&1 || true
  rm -rf "$state"
}
trap cleanup EXIT
hack/control-plane/up.sh "$state/cp" >/dev/null
# shellcheck disable=SC1091
. "$state/cp/env"
kapi() { curl -sSf --cacert "$APISERVER_CA" -H "Authorization: Bearer $ADMIN_TOKEN" "$@"; }
kapi -H 'Content-Type: application/json' "$APISERVER_URL/api/v1/namespaces" \
  -d '{"metadata":{"name":"ws-attack"}}' >/dev/null
# The Workspace resource's CRD, which the backend needs served before it starts.
kapi -H 'Content-Type: application/yaml' "$APISERVER_URL/apis/apiextensions.k8s.io/v1/customresourcedefinitions" \
  --data-binary @crates/outfit-workspaces-core/src/resource/crd.yaml >/dev/null
for _ in $(seq 1 50); do
  kapi "$APISERVER_URL/apis/outfit.dev/v1alpha1" 2>/dev/null | grep -q '"workspaces"' && break
  sleep 0.2
done
port=18126
printf "namespace: ws-attack\nlisten: 127.0.0.1:%s\nadminListen: ''\nbodyReadTimeout: %s\n" "$port" "$body_timeout" \
  >"$state/ws.yaml"
KUBECONFIG="$state/cp/kubeconfig" "$BIN_DIR/outfit" workspaces --config "$state/ws.yaml" >"$state/backend.log" 2>&1 &
backend=$!
for _ in $(seq 1 100); do
  curl -s -o /dev/null "http://127.0.0.1:$port/api/v1/openapi.json" && break
  kill -0 "$backend" 2>/dev/null || { cat "$state/backend.log" >&2; echo "the backend exited" >&2; exit 1; }
  sleep 0.2
done
echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); nproc: $(nproc); load average: $(cat /proc/loadavg)"
hack/workspaces-attack.py --port "$port" --pid "$backend" --check "${flags[@]}" "$@"
