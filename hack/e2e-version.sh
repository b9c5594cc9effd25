#!/usr/bin/env bash
# Runs the end-to-end suite (cargo test -p outfit --test integration: the webhook, the cluster
# mode, the workspace backend, Helm) against another Kubernetes release than CI's: by default the
# oldest one outfit supports (KUBERNETES_OLDEST_VERSION in hack/control-plane/versions.env).
# The control plane of that release is built once into its own cache directory (a few minutes).
#
# usage: hack/e2e-version.sh [VERSION] [TEST NAME FILTER...]
#   hack/e2e-version.sh                  the oldest supported release, every end-to-end test
#   hack/e2e-version.sh 1.35.4 helm      another release, the tests whose names contain "helm"
# Closes with "tests: N passed, N failed" (hack/test.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# shellcheck source=control-plane/versions.env
oldest=$(. hack/control-plane/versions.env && echo "$KUBERNETES_OLDEST_VERSION")
version=$oldest
if [ $# -gt 0 ] && [[ "$1" =~ ^[0-9] ]]; then
  version=$1
  shift
fi
echo "[e2e-version] Kubernetes $version (oldest supported: $oldest)" >&2
KUBERNETES_VERSION=$version exec hack/test.sh --workspace --test integration --locked -- "$@"
