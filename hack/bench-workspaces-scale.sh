#!/usr/bin/env bash
# The workspace backend at a university's scale (BENCHMARKS.md, "Workspace backend at scale";
# issue 25): builds the release binaries, starts a fresh cluster with K simulated nodes
# (hack/control-plane/up.sh --nodes K) and a kube-apiserver audit log of the backend's own
# requests, runs workspaces-scale on it and stops the cluster, however the run ends.
#
#   hack/bench-workspaces-scale.sh [--smoke] [--nodes K (200)] [workspaces-scale flags:
#       --workspaces 10000, --users 2000, --rate 20, --bare-creates 400, --churn-every 20,
#       --list-rate 10, --list-requests 2000, --sample-every 1000, --streams 2000, --starts 1000,
#       --storage-strategy nfs|per-user|per-workspace|ephemeral (unset: the workspaces mount no home)]
#
# --smoke: 50 workspaces of 10 users on 5 nodes on a debug build, to show the script still runs
# (hack/lib/bins.sh); its figures mean nothing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. hack/lib/bins.sh
take_smoke "$@"
nodes=200
smoke_flags=()
if [ "$SMOKE" = 1 ]; then
  shift
  nodes=5
  smoke_flags=(--workspaces 50 --users 10 --rate 50 --bare-creates 20 --churn-every 10
    --list-rate 20 --list-requests 50 --sample-every 10 --streams 20 --starts 10)
fi
if [ "${1:-}" = --nodes ]; then
  nodes="$2"
  shift 2
fi
build_bins
state="$(mktemp -d)"
trap 'hack/control-plane/down.sh "$state" >/dev/null 2>&1 || true; rm -rf "$state"' EXIT
# Only the backend's ServiceAccount is audited (workspaces-scale makes it), once per request,
# in one file (kube-apiserver rotates it at 100 MB by default, which would lose the counts).
cat >"$state/audit-policy.yaml" <<'POLICY'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
- level: Metadata
  users: ["system:serviceaccount:default:outfit-workspaces"]
- level: None
POLICY
OUTFIT_CP_APISERVER_ARGS="${OUTFIT_CP_APISERVER_ARGS:-} --audit-policy-file=$state/audit-policy.yaml --audit-log-path=$state/audit.log --audit-log-maxsize=100000" \
  hack/control-plane/up.sh --nodes "$nodes" "$state"
echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); nproc: $(nproc); nodes: $nodes; load average: $(cat /proc/loadavg)"
"$BIN_DIR/workspaces-scale" --state-dir "$state" --outfit "$BIN_DIR/outfit" \
  --audit-log "$state/audit.log" --work "$state/work" "${smoke_flags[@]}" "$@"
echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); load average: $(cat /proc/loadavg)"
