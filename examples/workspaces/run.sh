#!/usr/bin/env bash
# The workspace backend on this example, on the project's own test cluster (hack/control-plane:
# a real kube-apiserver, scheduler and controller manager, with kwok's fake node, so workspaces
# are scheduled and turn Ready without running): open the page it prints, sign in with the token
# it prints, and launch, stop, start and delete workspaces. Ctrl-C stops it all.
#
#   examples/workspaces/run.sh
#
# It builds the test cluster first if it is not built (hack/control-plane/build.sh: Go modules,
# cached in ${OUTFIT_CACHE_DIR:-~/.cache/outfit}) and outfit (cargo build), serves manifests/ on
# 127.0.0.1:8000, and starts `outfit workspaces --config examples/workspaces/config.yaml` on
# 127.0.0.1:8080. On a cluster of your own (kind, k3s): apply the Workspace CRD that
# `outfit manifests --workspaces` prints, create the namespace `workspaces-example`, serve manifests/
# on port 8000 and run that last command with your KUBECONFIG.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
here="$root/examples/workspaces"
log() { echo "[example] $*" >&2; }

state=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  "$root/hack/control-plane/down.sh" "$state/cluster" >/dev/null 2>&1 || true
  rm -rf "$state"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log "building outfit (the first build takes about 3.5 minutes on 2 cores)"
(cd "$root" && cargo build --locked -p outfit)
outfit="${CARGO_TARGET_DIR:-$root/target}/debug/outfit"

log "starting the test cluster with one node (its first build takes a while; cached after)"
"$root/hack/control-plane/build.sh"
"$root/hack/control-plane/up.sh" --nodes 1 "$state/cluster" >"$state/up.log" 2>&1 \
  || { cat "$state/up.log" >&2; exit 1; }
# shellcheck disable=SC1091
. "$state/cluster/env"

api() { # METHOD PATH CONTENT-TYPE [BODY FILE]
  curl -sS --fail-with-body --cacert "$APISERVER_CA" -H "Authorization: Bearer $ADMIN_TOKEN" \
    -X "$1" -H "Content-Type: $3" ${4:+--data-binary "@$4"} "$APISERVER_URL$2" >/dev/null
}
log "installing the Workspace CRD and the namespace workspaces-example"
"$outfit" manifests --workspaces | awk 'BEGIN { RS = "\n---\n" } /\nkind: CustomResourceDefinition\n/ { print }' \
  >"$state/crd.yaml"
api POST /apis/apiextensions.k8s.io/v1/customresourcedefinitions application/yaml "$state/crd.yaml"
printf '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"workspaces-example"}}' >"$state/ns.json"
api POST /api/v1/namespaces application/json "$state/ns.json"

log "serving the catalogue's manifests on 127.0.0.1:8000"
python3 -m http.server --bind 127.0.0.1 --directory "$here/manifests" 8000 >"$state/manifests.log" 2>&1 &
pids+=($!)

log "starting outfit workspaces"
"$outfit" workspaces --config "$here/config.yaml" &
pids+=($!)
for _ in $(seq 100); do
  curl -sf http://127.0.0.1:8081/readyz >/dev/null 2>&1 && break
  sleep 0.2
done
cat >&2 <<MSG

  The page:   http://127.0.0.1:8080/
  Sign in with alice's token (any token the cluster accepts):
              $ALICE_TOKEN
  Or by API:  curl -s -H "Authorization: Bearer $ALICE_TOKEN" -H 'Content-Type: application/json' \
                http://127.0.0.1:8080/api/v1/workspaces -d '{"manifest":"web"}'
  KUBECONFIG=$state/cluster/kubeconfig for kubectl, if you have it. Ctrl-C stops everything.

MSG
wait -n "${pids[@]}"
