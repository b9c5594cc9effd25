#!/usr/bin/env bash
# Soak outfit under load and faults for --minutes N (default 10); see RELIABILITY.md. Builds the
# release binaries first (CARGO_TARGET_DIR is honoured), starts its own control plane with
# hack/control-plane/up.sh and stops it at the end. Exit status 1 on any failure.
#
#   hack/soak.sh [--smoke] [soak flags]               outfit serve --from-cluster: load, policy
#                                                     changes, certificate rotation, kube-apiserver
#                                                     outages (crates/outfit-loadgen/src/bin/soak/)
#   hack/soak.sh [--smoke] --workspaces [flags]       outfit workspaces: users launching and
#                                                     deleting on two replicas through
#                                                     kube-apiserver outages and replica kills, then
#                                                     an orphan check (.../bin/workspaces-soak/)
#
# --help after either lists its flags (a flag given twice: the last counts, so flags after --smoke
# override its own). --smoke: every fault once, in well under a minute, on a
# debug build, to show the soak still runs (hack/lib/bins.sh); its figures mean nothing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. hack/lib/bins.sh
take_smoke "$@"
[ "$SMOKE" = 1 ] && shift
bin=soak
smoke_flags=(--minutes 0.8 --rate 40 --connections 2 --policies 10 --namespaces 2 --cluster-policies 2
  --policy-every 2 --rotate-every 8 --outage-every 8 --outage-seconds 3 --poll-interval 1)
if [ "${1:-}" = --workspaces ]; then
  bin=workspaces-soak
  shift
  # --storage-grace 5 --settle 60: the backend keeps a user's storage for storageGracePeriod
  # after their last workspace, then its sweep (every 5 s) removes it; the check waits for that.
  # With the backend's 1m it waited about 90 s of the smoke's 165.
  smoke_flags=(--minutes 0.8 --users 2 --outage-every 10 --outage-seconds 3 --grace 10
    --replica-kill-every 12 --replica-down 3 --ready-wait 45 --storage-grace 5 --settle 60)
fi
[ "$SMOKE" = 1 ] || smoke_flags=()
build_bins
exec "$BIN_DIR/$bin" "${smoke_flags[@]}" "$@"
