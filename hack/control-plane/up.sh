#!/usr/bin/env bash
# Start a real etcd + kube-apiserver on 127.0.0.1 (free ports) for integration
# tests, and wait until the apiserver's /readyz is ok. With --nodes N (node
# mode) also start kube-controller-manager, kube-scheduler and kwok with N fake
# nodes, and wait until the nodes are Ready and ServiceAccount default/default
# exists: pods then get scheduled, get IPs, turn Ready and get deleted. Node
# mode also installs the VolumeSnapshot CRDs and runs the external-snapshotter's
# snapshot-controller (the CSI side is outfit-test-support's stand-in).
#
# With --real-nodes 1 also a real node (real-node.sh): a kubelet running real containers through
# containerd, pulling the project's images from a local registry (needs root; one per machine).
#
# usage: up.sh [--nodes N] [--real-nodes 0|1] STATE_DIR
#
# Writes into STATE_DIR:
#   kubeconfig, kubeconfig-alice, kubeconfig-bob   (token auth, CA embedded)
#   env                  shell-sourceable: KUBECONFIG, APISERVER_URL, pids, tokens, ...
#   etcd.pid, kube-apiserver.pid (+ kube-controller-manager, kube-scheduler, kwok,
#     snapshot-controller)
#   etcd.log, kube-apiserver.log (+ kube-controller-manager, kube-scheduler, kwok,
#     snapshot-controller)
#   pki/ (CA, serving cert, service-account keys), tokens.csv, etcd-data/
#   node mode: kubeconfig-{controller-manager,scheduler,kwok,snapshot-controller}, kwok.yaml
# An existing STATE_DIR may be reused after down.sh: certificates are kept,
# etcd-data is wiped (every start is an empty cluster).
#
# Environment:
#   OUTFIT_CP_NODES            default for --nodes (default 0: no node mode)
#   OUTFIT_CP_REAL_NODES       default for --real-nodes (default 0)
#   OUTFIT_CP_START_TIMEOUT    seconds to wait for /readyz, and again for the
#                              node-mode components (default 90)
#   OUTFIT_CP_APISERVER_ARGS   extra kube-apiserver flags (word-split)
#   OUTFIT_CP_KCM_CONTROLLERS  node mode: kube-controller-manager --controllers
#                              (default *, the upstream default set)
#   OUTFIT_CP_KCM_ARGS, OUTFIT_CP_SCHEDULER_ARGS, OUTFIT_CP_KWOK_ARGS,
#   OUTFIT_CP_SNAPSHOT_CONTROLLER_ARGS
#                              node mode: extra flags (word-split)
#   OUTFIT_CP_REGISTRY_MBPS    the real node pulls from its registry at this many MB/s in
#                              all (hack/control-plane/throttle.py; default: no limit)
#   OUTFIT_CACHE_DIR           see build.sh
# Stop with: down.sh STATE_DIR
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

usage() { sed -n '2,39p' "$0" >&2; exit 2; }
NODES="${OUTFIT_CP_NODES:-0}"
REAL_NODES="${OUTFIT_CP_REAL_NODES:-0}"
positional=()
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) [ $# -ge 2 ] || usage; NODES="$2"; shift 2 ;;
    --nodes=*) NODES="${1#--nodes=}"; shift ;;
    --real-nodes) [ $# -ge 2 ] || usage; REAL_NODES="$2"; shift 2 ;;
    --real-nodes=*) REAL_NODES="${1#--real-nodes=}"; shift ;;
    -h|--help) usage ;;
    -*) cp_log "unknown flag: $1"; usage ;;
    *) positional+=("$1"); shift ;;
  esac
done
[ "${#positional[@]}" -eq 1 ] || usage
case "$NODES" in
  ''|*[!0-9]*) cp_die "--nodes / OUTFIT_CP_NODES must be a number 0..200, got '$NODES'" ;;
esac
NODES=$((10#$NODES))
[ "$NODES" -le 200 ] || cp_die "--nodes must be at most 200 (one /24 pod CIDR per node), got $NODES"
case "$REAL_NODES" in
  0|1) ;;
  *) cp_die "--real-nodes / OUTFIT_CP_REAL_NODES must be 0 or 1 (one real node per machine), got '$REAL_NODES'" ;;
esac
# Node mode (the controller manager, the scheduler, kwok, the snapshot controller) runs for kwok's
# nodes and for the real one alike.
NODE_MODE=0
[ "$NODES" -eq 0 ] && [ "$REAL_NODES" -eq 0 ] || NODE_MODE=1
mkdir -p "${positional[0]}"
STATE_DIR="$(cd "${positional[0]}" && pwd)"
START_TIMEOUT="${OUTFIT_CP_START_TIMEOUT:-90}"

# Fixed network layout (see README.md). Node i (0-based) gets pod CIDR
# 10.244.(i+1).0/24; a pod on a kwok-managed node without a podCIDR gets an
# IP from 10.244.0.0/24. Every node's InternalIP (and so every hostIP) is
# 127.0.0.1, where kwok serves the kubelet API.
SERVICE_CIDR="10.96.0.0/16"
POD_CIDR="10.244.0.0/16"
KWOK_FALLBACK_CIDR="10.244.0.0/24"
NODE_IP="127.0.0.1"
NODE_PREFIX="kwok-node-"
KWOK_NODE_ANNOTATION="kwok.x-k8s.io/node"
KWOK_NODE_ANNOTATION_VALUE="fake"
KWOK_CLUSTER_EXEC="outfit-local-exec"

# Fixed, documented test tokens (see README.md). Never use them outside tests.
ADMIN_TOKEN="outfit-admin-token"
ALICE_TOKEN="outfit-alice-token"
BOB_TOKEN="outfit-bob-token"
# Node mode only: the identities of the node-mode components.
KCM_TOKEN="outfit-kube-controller-manager-token"
SCHEDULER_TOKEN="outfit-kube-scheduler-token"
KWOK_TOKEN="outfit-kwok-token"
SNAPSHOT_CONTROLLER_TOKEN="outfit-snapshot-controller-token"

for tool in curl openssl base64 setsid; do
  command -v "$tool" >/dev/null || cp_die "$tool is required"
done
if [ "$NODE_MODE" = 1 ]; then
  command -v jq >/dev/null || cp_die "jq is required for --nodes"
fi

# Refuse to start twice on the same state dir.
for name in etcd kube-apiserver kube-controller-manager kube-scheduler kwok snapshot-controller; do
  if [ -f "$STATE_DIR/$name.pid" ] && kill -0 "$(cat "$STATE_DIR/$name.pid")" 2>/dev/null; then
    cp_die "$name is already running (pid $(cat "$STATE_DIR/$name.pid")) for $STATE_DIR; run down.sh first"
  fi
done

"$CP_HERE/build.sh"

t_up=$(cp_now_ms)

# ---------------------------------------------------------------- helpers
# free_port VAR: store a free TCP port on 127.0.0.1 in VAR. Ports come from
# below the ephemeral range, so outgoing connections cannot grab one between
# the check and the bind (a bind race is still retried by the callers).
used_ports=""
free_port() {
  local lo=20000 hi=32000 p _
  for _ in $(seq 1 200); do
    p=$(( lo + (RANDOM * 32768 + RANDOM) % (hi - lo) ))
    case " $used_ports " in *" $p "*) continue ;; esac
    if command -v ss >/dev/null; then
      [ -z "$(ss -Htan "( sport = :$p )" 2>/dev/null)" ] || continue
    elif (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      continue
    fi
    used_ports="$used_ports $p"
    printf -v "$1" '%s' "$p"
    return 0
  done
  cp_die "no free port found"
}

# start_daemon NAME LOG CMD... : CMD detached (survives this script), NAME.pid its pid.
start_daemon() {
  local name="$1" log="$2"; shift 2
  cp_start_daemon "$STATE_DIR/$name.pid" "$log" "$@"
}

pid_of() { cat "$STATE_DIR/$1.pid" 2>/dev/null || true; }

started_ok=0
cleanup_on_failure() {
  if [ "$started_ok" != 1 ]; then
    cp_log "start-up failed; stopping what was started"
    "$CP_HERE/down.sh" "$STATE_DIR" >&2 || true
  fi
}
trap cleanup_on_failure EXIT

log_tail() {
  printf -- '----- last 40 lines of %s -----\n' "$1" >&2
  tail -n 40 "$1" >&2 || true
  printf -- '-----\n' >&2
}

# ---------------------------------------------------------------- files
pki="$STATE_DIR/pki"
mkdir -p "$pki"
t=$(cp_now_ms)
if [ ! -s "$pki/ca.crt" ] || [ ! -s "$pki/apiserver.crt" ] || [ ! -s "$pki/sa.key" ]; then
  (
    cd "$pki"
    umask 077
    openssl ecparam -genkey -name prime256v1 -noout -out ca.key 2>/dev/null
    openssl req -x509 -new -key ca.key -sha256 -days 3650 -subj "/CN=outfit-test-ca" \
      -addext "basicConstraints=critical,CA:TRUE" \
      -addext "keyUsage=critical,keyCertSign,cRLSign" -out ca.crt
    openssl ecparam -genkey -name prime256v1 -noout -out apiserver.key 2>/dev/null
    openssl req -new -key apiserver.key -subj "/CN=kube-apiserver" -out apiserver.csr
    printf '%s\n' \
      "basicConstraints=critical,CA:FALSE" \
      "keyUsage=critical,digitalSignature,keyEncipherment" \
      "extendedKeyUsage=serverAuth" \
      "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:10.96.0.1" \
      >apiserver.ext
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
      -days 3650 -sha256 -extfile apiserver.ext -out apiserver.crt 2>/dev/null
    # Service-account token signing key pair.
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    chmod 644 ca.crt apiserver.crt sa.pub
  )
  # A new CA invalidates certificates issued by an older one.
  rm -f "$pki/kwok.crt" "$pki/apiserver-kubelet-client.crt"
fi
# issue_cert NAME SUBJECT EXTENSION... : a P-256 key and a cert signed by the CA.
issue_cert() {
  local name="$1" subj="$2"; shift 2
  (
    cd "$pki"
    umask 077
    openssl ecparam -genkey -name prime256v1 -noout -out "$name.key" 2>/dev/null
    openssl req -new -key "$name.key" -subj "$subj" -out "$name.csr"
    printf '%s\n' "$@" >"$name.ext"
    openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial \
      -days 3650 -sha256 -extfile "$name.ext" -out "$name.crt" 2>/dev/null
    chmod 644 "$name.crt"
  )
}
if [ "$NODE_MODE" = 1 ]; then
  # kwok serves the kubelet API (exec, logs, ...) on 127.0.0.1 with this cert.
  # The apiserver verifies it (--kubelet-certificate-authority) and presents
  # the client cert (kwok accepts any client).
  [ -s "$pki/kwok.crt" ] || issue_cert kwok "/CN=kwok-kubelet" \
    "basicConstraints=critical,CA:FALSE" \
    "keyUsage=critical,digitalSignature,keyEncipherment" \
    "extendedKeyUsage=serverAuth" \
    "subjectAltName=IP:127.0.0.1,DNS:localhost"
  [ -s "$pki/apiserver-kubelet-client.crt" ] || issue_cert apiserver-kubelet-client \
    "/O=system:masters/CN=kube-apiserver-kubelet-client" \
    "basicConstraints=critical,CA:FALSE" \
    "keyUsage=critical,digitalSignature,keyEncipherment" \
    "extendedKeyUsage=clientAuth"
fi
cat >"$STATE_DIR/tokens.csv" <<EOF
$ADMIN_TOKEN,outfit-admin,uid-outfit-admin,"system:masters"
$ALICE_TOKEN,alice,uid-alice,"team-a"
$BOB_TOKEN,bob,uid-bob,"team-b"
EOF
if [ "$NODE_MODE" = 1 ]; then
  # kube-controller-manager runs every controller under its own identity
  # (--use-service-account-credentials=false), so it needs system:masters.
  # kube-scheduler gets its bootstrap RBAC roles through its user name.
  # snapshot-controller is an admin too: upstream's RBAC for it is not installed.
  cat >>"$STATE_DIR/tokens.csv" <<EOF
$KCM_TOKEN,system:kube-controller-manager,uid-kube-controller-manager,"system:masters"
$SCHEDULER_TOKEN,system:kube-scheduler,uid-kube-scheduler
$KWOK_TOKEN,system:kwok-controller,uid-kwok-controller,"system:masters"
$SNAPSHOT_CONTROLLER_TOKEN,system:snapshot-controller,uid-snapshot-controller,"system:masters"
EOF
fi
if [ "$REAL_NODES" -gt 0 ]; then
  # The real node's kubelet, as the Node authorizer knows nodes (real-node.sh).
  printf '%s\n' 'outfit-node-0-token,system:node:outfit-node-0,uid-outfit-node-0,"system:nodes"' >>"$STATE_DIR/tokens.csv"
  # Its kube-proxy, which the bootstrap RBAC (system:node-proxier) knows by this name.
  printf '%s\n' 'outfit-kube-proxy-token,system:kube-proxy,uid-kube-proxy' >>"$STATE_DIR/tokens.csv"
fi
chmod 600 "$STATE_DIR/tokens.csv"
cp_log "certificates and token file ready in $(cp_elapsed "$t")"

# ---------------------------------------------------------------- etcd
# Every start is a fresh cluster: old etcd data (from an earlier up.sh on
# this dir) is dropped; certificates are kept.
rm -rf "$STATE_DIR/etcd-data"
: >"$STATE_DIR/etcd.log"
for _attempt in 1 2 3; do
  free_port ETCD_PORT; free_port ETCD_PEER_PORT
  ETCD_URL="http://127.0.0.1:$ETCD_PORT"
  t=$(cp_now_ms)
  start_daemon etcd "$STATE_DIR/etcd.log" "$CP_ETCD" \
    --name=outfit-test \
    --data-dir="$STATE_DIR/etcd-data" \
    --listen-client-urls="$ETCD_URL" \
    --advertise-client-urls="$ETCD_URL" \
    --listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster="outfit-test=http://127.0.0.1:$ETCD_PEER_PORT" \
    --unsafe-no-fsync=true \
    --quota-backend-bytes=$((1024 * 1024 * 1024)) \
    --log-level=warn
  etcd_pid=$(pid_of etcd)
  ok=0
  for _ in $(seq 1 300); do   # <= 30 s
    if ! kill -0 "$etcd_pid" 2>/dev/null; then break; fi
    if curl -fsS --max-time 1 "$ETCD_URL/health" 2>/dev/null | grep -q '"health":"true"'; then ok=1; break; fi
    sleep 0.1
  done
  if [ "$ok" = 1 ]; then break; fi
  if ! kill -0 "$etcd_pid" 2>/dev/null && grep -q 'address already in use' "$STATE_DIR/etcd.log"; then
    cp_log "etcd port taken (race), retrying with other ports"; continue
  fi
  log_tail "$STATE_DIR/etcd.log"
  cp_die "etcd did not become healthy at $ETCD_URL/health"
done
[ "$ok" = 1 ] || { log_tail "$STATE_DIR/etcd.log"; cp_die "etcd could not get a free port"; }
cp_log "etcd (pid $etcd_pid) healthy at $ETCD_URL in $(cp_elapsed "$t")"

# ---------------------------------------------------------------- kube-apiserver
: >"$STATE_DIR/kube-apiserver.log"
# shellcheck disable=SC2206 # intentional word splitting of extra args
extra_args=(${OUTFIT_CP_APISERVER_ARGS:-})
node_mode_api_args=()
if [ "$NODE_MODE" = 1 ]; then
  # pods/exec, pods/log, port-forward: the apiserver dials the node's
  # InternalIP (127.0.0.1) at status.daemonEndpoints.kubeletEndpoint.Port,
  # where kwok serves the kubelet API.
  node_mode_api_args=(
    --kubelet-preferred-address-types=InternalIP
    --kubelet-certificate-authority="$pki/ca.crt"
    --kubelet-client-certificate="$pki/apiserver-kubelet-client.crt"
    --kubelet-client-key="$pki/apiserver-kubelet-client.key"
  )
fi
for _attempt in 1 2 3; do
  free_port API_PORT
  APISERVER_URL="https://127.0.0.1:$API_PORT"
  t=$(cp_now_ms)
  start_daemon kube-apiserver "$STATE_DIR/kube-apiserver.log" "$CP_KUBE_APISERVER" \
    --etcd-servers="$ETCD_URL" \
    --bind-address=127.0.0.1 \
    --secure-port="$API_PORT" \
    --advertise-address=127.0.0.1 \
    --endpoint-reconciler-type=none \
    --tls-cert-file="$pki/apiserver.crt" \
    --tls-private-key-file="$pki/apiserver.key" \
    --cert-dir="$pki" \
    --token-auth-file="$STATE_DIR/tokens.csv" \
    --authorization-mode=Node,RBAC \
    --service-account-issuer="$APISERVER_URL" \
    --service-account-key-file="$pki/sa.pub" \
    --service-account-signing-key-file="$pki/sa.key" \
    --service-cluster-ip-range="$SERVICE_CIDR" \
    --allow-privileged=true \
    --enable-admission-plugins=MutatingAdmissionWebhook,ValidatingAdmissionWebhook \
    --disable-admission-plugins=StorageObjectInUseProtection \
    --profiling=false \
    --v=1 \
    "${node_mode_api_args[@]}" \
    "${extra_args[@]}"
  api_pid=$(pid_of kube-apiserver)
  ok=0
  deadline=$(( $(cp_now_ms) + START_TIMEOUT * 1000 ))
  while [ "$(cp_now_ms)" -lt "$deadline" ]; do
    if ! kill -0 "$api_pid" 2>/dev/null; then break; fi
    if [ "$(curl -sS --max-time 2 --cacert "$pki/ca.crt" -H "Authorization: Bearer $ADMIN_TOKEN" \
             "$APISERVER_URL/readyz" 2>/dev/null)" = "ok" ]; then ok=1; break; fi
    sleep 0.2
  done
  if [ "$ok" = 1 ]; then break; fi
  if ! kill -0 "$api_pid" 2>/dev/null && grep -q 'address already in use' "$STATE_DIR/kube-apiserver.log"; then
    cp_log "apiserver port taken (race), retrying with another port"; continue
  fi
  log_tail "$STATE_DIR/kube-apiserver.log"
  if kill -0 "$api_pid" 2>/dev/null; then
    curl -sS --max-time 2 --cacert "$pki/ca.crt" -H "Authorization: Bearer $ADMIN_TOKEN" \
      "$APISERVER_URL/readyz?verbose" 2>&1 | grep -v '\[+\]' >&2 || true
  fi
  if kill -0 "$api_pid" 2>/dev/null; then
    cp_die "kube-apiserver (pid $api_pid) not ready at $APISERVER_URL/readyz after ${START_TIMEOUT}s"
  fi
  cp_die "kube-apiserver exited during start-up (log: $STATE_DIR/kube-apiserver.log)"
done
[ "$ok" = 1 ] || { log_tail "$STATE_DIR/kube-apiserver.log"; cp_die "kube-apiserver could not get a free port"; }
cp_log "kube-apiserver v$KUBERNETES_VERSION (pid $api_pid) ready at $APISERVER_URL in $(cp_elapsed "$t")"

# ---------------------------------------------------------------- kubeconfigs
ca_data="$(base64 -w0 <"$pki/ca.crt")"
write_kubeconfig() {   # FILE USER TOKEN
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: outfit-test
  cluster:
    server: $APISERVER_URL
    certificate-authority-data: $ca_data
users:
- name: $2
  user:
    token: $3
contexts:
- name: $2@outfit-test
  context:
    cluster: outfit-test
    user: $2
current-context: $2@outfit-test
EOF
  chmod 600 "$1"
}
write_kubeconfig "$STATE_DIR/kubeconfig" outfit-admin "$ADMIN_TOKEN"
write_kubeconfig "$STATE_DIR/kubeconfig-alice" alice "$ALICE_TOKEN"
write_kubeconfig "$STATE_DIR/kubeconfig-bob" bob "$BOB_TOKEN"

# ---------------------------------------------------------------- node mode
node_env=""
if [ "$NODE_MODE" = 1 ]; then
  t_nodes=$(cp_now_ms)
  write_kubeconfig "$STATE_DIR/kubeconfig-controller-manager" system:kube-controller-manager "$KCM_TOKEN"
  write_kubeconfig "$STATE_DIR/kubeconfig-scheduler" system:kube-scheduler "$SCHEDULER_TOKEN"
  write_kubeconfig "$STATE_DIR/kubeconfig-kwok" system:kwok-controller "$KWOK_TOKEN"
  write_kubeconfig "$STATE_DIR/kubeconfig-snapshot-controller" system:snapshot-controller "$SNAPSHOT_CONTROLLER_TOKEN"

  # kapi METHOD PATH [CONTENT_TYPE BODY_FILE_OR_@-] -> body on stdout, HTTP
  # status in $kapi_code (as admin).
  kapi_code=""
  kapi() {
    local method="$1" path="$2" args out
    args=(-sS --max-time 10 --cacert "$pki/ca.crt" -H "Authorization: Bearer $ADMIN_TOKEN"
          -H 'Accept: application/json' -X "$method" -w '\n%{http_code}')
    [ $# -lt 4 ] || args+=(-H "Content-Type: $3" --data-binary "$4")
    out="$(curl "${args[@]}" "$APISERVER_URL$path" 2>&1)" || true
    kapi_code="${out##*$'\n'}"
    printf '%s\n' "${out%$'\n'*}"
  }

  # ---- kube-controller-manager and kube-scheduler (start first: slowest)
  # All default controllers. node-lifecycle-controller is needed: the
  # apiserver's TaintNodesByCondition admission gives every new Node the
  # node.kubernetes.io/not-ready:NoSchedule taint, and only that controller
  # removes it once kwok reports Ready.
  KCM_CONTROLLERS="${OUTFIT_CP_KCM_CONTROLLERS:-*}"
  # shellcheck disable=SC2206 # intentional word splitting of extra args
  kcm_extra=(${OUTFIT_CP_KCM_ARGS:-})
  # shellcheck disable=SC2206
  sched_extra=(${OUTFIT_CP_SCHEDULER_ARGS:-})
  # shellcheck disable=SC2206
  kwok_extra=(${OUTFIT_CP_KWOK_ARGS:-})
  # shellcheck disable=SC2206
  snapshot_extra=(${OUTFIT_CP_SNAPSHOT_CONTROLLER_ARGS:-})
  start_kcm() {
    free_port KCM_PORT
    start_daemon kube-controller-manager "$STATE_DIR/kube-controller-manager.log" \
      "$CP_KUBE_CONTROLLER_MANAGER" \
      --kubeconfig="$STATE_DIR/kubeconfig-controller-manager" \
      --bind-address=127.0.0.1 \
      --secure-port="$KCM_PORT" \
      --leader-elect=false \
      --controllers="$KCM_CONTROLLERS" \
      --use-service-account-credentials=false \
      --service-account-private-key-file="$pki/sa.key" \
      --root-ca-file="$pki/ca.crt" \
      --cluster-signing-cert-file="$pki/ca.crt" \
      --cluster-signing-key-file="$pki/ca.key" \
      --service-cluster-ip-range="$SERVICE_CIDR" \
      --cluster-name=outfit-test \
      --flex-volume-plugin-dir="$STATE_DIR/kcm-flexvolume" \
      --profiling=false \
      --v=1 \
      "${kcm_extra[@]}"
  }
  start_scheduler() {
    free_port SCHEDULER_PORT
    start_daemon kube-scheduler "$STATE_DIR/kube-scheduler.log" "$CP_KUBE_SCHEDULER" \
      --kubeconfig="$STATE_DIR/kubeconfig-scheduler" \
      --bind-address=127.0.0.1 \
      --secure-port="$SCHEDULER_PORT" \
      --leader-elect=false \
      --profiling=false \
      --v=1 \
      "${sched_extra[@]}"
  }
  start_kwok() {
    free_port KWOK_PORT
    # KWOK_WORKDIR keeps kwok away from ~/.kwok/kwok.yaml (loaded by default).
    # --node-port/--node-ip end up in each node's status (InternalIP and
    # daemonEndpoints.kubeletEndpoint.Port), which is where the apiserver
    # sends pods/exec.
    start_daemon kwok "$STATE_DIR/kwok.log" env KWOK_WORKDIR="$STATE_DIR/kwok-workdir" "$CP_KWOK" \
      --kubeconfig="$STATE_DIR/kubeconfig-kwok" \
      --config="$STATE_DIR/kwok.yaml" \
      --manage-all-nodes=false \
      --manage-nodes-with-annotation-selector="$KWOK_NODE_ANNOTATION=$KWOK_NODE_ANNOTATION_VALUE" \
      --node-ip="$NODE_IP" \
      --node-port="$KWOK_PORT" \
      --server-address="127.0.0.1:$KWOK_PORT" \
      --tls-cert-file="$pki/kwok.crt" \
      --tls-private-key-file="$pki/kwok.key" \
      --cidr="$KWOK_FALLBACK_CIDR" \
      --node-lease-duration-seconds=40 \
      --enable-crds=Exec,Logs,ClusterLogs \
      "${kwok_extra[@]}"
  }
  # snapshot-controller: it lists the three snapshot CRDs with a backoff (up to
  # 30 s) until they are served, so it may start before they are. No volume
  # group snapshots: their CRDs are not installed, and with the (GA) gate on it
  # would first wait --retry-crd-interval-max for them. A short retry ceiling
  # (upstream: 5 min): a snapshot made before its claim is bound is retried
  # within seconds, as tests expect.
  start_snapshot_controller() {
    start_daemon snapshot-controller "$STATE_DIR/snapshot-controller.log" "$CP_SNAPSHOT_CONTROLLER" \
      --kubeconfig="$STATE_DIR/kubeconfig-snapshot-controller" \
      --leader-election=false \
      --feature-gates=CSIVolumeGroupSnapshot=false \
      --retry-interval-max=5s \
      --v=2 \
      "${snapshot_extra[@]}"
  }
  : >"$STATE_DIR/kube-controller-manager.log"
  : >"$STATE_DIR/kube-scheduler.log"
  : >"$STATE_DIR/kwok.log"
  : >"$STATE_DIR/snapshot-controller.log"
  start_kcm
  start_scheduler

  # ---- kwok's CRDs, its config (stages + ClusterExec), the nodes, then kwok
  t=$(cp_now_ms)
  # Only the CRDs kwok watches (its --enable-crds): per-pod Exec overrides and
  # Logs/ClusterLogs for pods/log. All twelve are in $CP_KWOK_CRD_DIR. kwok
  # watches them with informers, so they need not be served yet when kwok
  # starts (the first request to a new CRD's resource takes ~2 s here).
  # The snapshot CRDs (VolumeSnapshotClass, VolumeSnapshotContent,
  # VolumeSnapshot) go in the same batch; the wait below waits for them to be
  # Established.
  SNAPSHOT_CRDS="volumesnapshotclasses volumesnapshotcontents volumesnapshots"
  crd_pids=()
  crd_files=()
  for r in execs logs clusterlogs; do crd_files+=("$CP_KWOK_CRD_DIR/kwok.x-k8s.io_$r.yaml"); done
  for r in $SNAPSHOT_CRDS; do crd_files+=("$CP_SNAPSHOT_CRD_DIR/snapshot.storage.k8s.io_$r.yaml"); done
  for f in "${crd_files[@]}"; do
    out="$STATE_DIR/.kapi-$(basename "$f" .yaml).out"
    ( kapi POST /apis/apiextensions.k8s.io/v1/customresourcedefinitions application/yaml "@$f" >"$out"
      case "$kapi_code" in 201|409) ;; *) cat "$out" >&2; cp_die "creating CRD from $f: HTTP $kapi_code" ;; esac
    ) &
    crd_pids+=($!)
  done
  for p in "${crd_pids[@]}"; do wait "$p" || exit 1; done
  rm -f "$STATE_DIR"/.kapi-*.out
  start_snapshot_controller
  # kwok.yaml: kwok's "fast" stages (nodes Ready at once, pods Running+Ready
  # at once, pods with a deletionTimestamp deleted at once, Job pods
  # Succeeded) and a static ClusterExec: every exec into any container of any
  # pod on a kwok node runs the command locally, on this machine, as this
  # user, in /. It is in the config file rather than a ClusterExec object so
  # it works from kwok's first second. A test can override it for one pod with
  # a namespaced kwok.x-k8s.io/v1alpha1 Exec named like the pod.
  {
    printf '# Written by hack/control-plane/up.sh: stages from sigs.k8s.io/kwok@v%s kustomize/stage.
' "$KWOK_VERSION"
    for f in "$CP_KWOK_STAGE_DIR"/*.yaml; do printf -- '---\n'; cat "$f"; done
    cat <<EOF
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterExec
metadata:
  name: $KWOK_CLUSTER_EXEC
spec:
  execs:
  - local:
      workDir: /
EOF
  } >"$STATE_DIR/kwok.yaml"
  mkdir -p "$STATE_DIR/kwok-workdir"
  NODE_NAMES=""
  for i in $(seq 0 $((NODES - 1))); do
    n="$NODE_PREFIX$i"
    node="$(jq -cn --arg n "$n" --arg cidr "10.244.$((i + 1)).0/24" \
      --arg ak "$KWOK_NODE_ANNOTATION" --arg av "$KWOK_NODE_ANNOTATION_VALUE" '{
      apiVersion:"v1",kind:"Node",
      metadata:{name:$n,
        annotations:{($ak):$av,"node.alpha.kubernetes.io/ttl":"0"},
        labels:{"kubernetes.io/hostname":$n,"kubernetes.io/os":"linux","kubernetes.io/arch":"amd64",
                "kubernetes.io/role":"agent","node-role.kubernetes.io/agent":"","type":"kwok"}},
      spec:{podCIDR:$cidr,podCIDRs:[$cidr]},
      status:{capacity:{cpu:"1k",memory:"1Ti",pods:"1k"},allocatable:{cpu:"1k",memory:"1Ti",pods:"1k"}}}')"
    kapi POST /api/v1/nodes application/json "$node" >"$STATE_DIR/.kapi.out"
    [ "$kapi_code" = 201 ] || { cat "$STATE_DIR/.kapi.out" >&2; cp_die "creating node $n: HTTP $kapi_code"; }
    NODE_NAMES="${NODE_NAMES:+$NODE_NAMES }$n"
  done
  rm -f "$STATE_DIR/.kapi.out"
  cp_log "kwok CRDs, kwok.yaml and $NODES node(s) created in $(cp_elapsed "$t")"
  start_kwok

  # ---- wait: health endpoints, nodes Ready, ServiceAccount default/default
  # A component that exits because its port was taken (bind race) is
  # restarted on another port, up to 3 times each.
  declare -A restarts=([kube-controller-manager]=0 [kube-scheduler]=0 [kwok]=0 [snapshot-controller]=0)
  declare -A ready_at=()
  t=$(cp_now_ms)
  deadline=$(( t + START_TIMEOUT * 1000 ))
  all_ok=0 failed_component="" n_ready=0
  while [ "$(cp_now_ms)" -lt "$deadline" ]; do
    for c in kube-controller-manager kube-scheduler kwok snapshot-controller; do
      pid="$(pid_of "$c")"
      kill -0 "$pid" 2>/dev/null && continue
      if grep -q 'address already in use' "$STATE_DIR/$c.log" && [ "${restarts[$c]}" -lt 3 ]; then
        restarts[$c]=$(( restarts[$c] + 1 ))
        cp_log "$c port taken (race), restarting on another port"
        case "$c" in
          kube-controller-manager) start_kcm ;;
          kube-scheduler) start_scheduler ;;
          kwok) start_kwok ;;
        esac
        continue
      fi
      failed_component="$c"; break 2
    done
    [ -n "${ready_at[kcm]:-}" ] || { [ "$(curl -sk --max-time 2 "https://127.0.0.1:$KCM_PORT/healthz" 2>/dev/null)" = ok ] && ready_at[kcm]=$(cp_elapsed "$t_nodes"); } || true
    [ -n "${ready_at[sched]:-}" ] || { [ "$(curl -sk --max-time 2 "https://127.0.0.1:$SCHEDULER_PORT/healthz" 2>/dev/null)" = ok ] && ready_at[sched]=$(cp_elapsed "$t_nodes"); } || true
    [ -n "${ready_at[kwok]:-}" ] || { curl -sf --max-time 2 --cacert "$pki/ca.crt" "https://127.0.0.1:$KWOK_PORT/healthz" >/dev/null 2>&1 && ready_at[kwok]=$(cp_elapsed "$t_nodes"); } || true
    if [ -z "${ready_at[nodes]:-}" ]; then
      n_ready="$(kapi GET "/api/v1/nodes" | jq --arg ak "$KWOK_NODE_ANNOTATION" \
        '[.items[]? | select(.metadata.annotations[$ak] != null)
          | select(any(.status.conditions[]?; .type == "Ready" and .status == "True"))
          | select(all(.spec.taints[]?; .key != "node.kubernetes.io/not-ready"))] | length' 2>/dev/null || echo 0)"
      [ "$n_ready" != "$NODES" ] || ready_at[nodes]=$(cp_elapsed "$t_nodes")
    fi
    if [ -z "${ready_at[sa]:-}" ]; then
      kapi GET /api/v1/namespaces/default/serviceaccounts/default >/dev/null
      [ "$kapi_code" != 200 ] || ready_at[sa]=$(cp_elapsed "$t_nodes")
    fi
    if [ -z "${ready_at[snapshots]:-}" ]; then
      n_established="$(kapi GET /apis/apiextensions.k8s.io/v1/customresourcedefinitions | jq \
        '[.items[]? | select(.spec.group == "snapshot.storage.k8s.io")
          | select(any(.status.conditions[]?; .type == "Established" and .status == "True"))] | length' \
        2>/dev/null || echo 0)"
      [ "$n_established" != 3 ] || ready_at[snapshots]=$(cp_elapsed "$t_nodes")
    fi
    if [ "${#ready_at[@]}" = 6 ]; then all_ok=1; break; fi
    sleep 0.2
  done
  if [ "$all_ok" != 1 ]; then
    if [ -n "$failed_component" ]; then
      log_tail "$STATE_DIR/$failed_component.log"
      cp_die "$failed_component exited during start-up (log: $STATE_DIR/$failed_component.log)"
    fi
    missing=""
    [ -n "${ready_at[kcm]:-}" ] || { missing+=" kube-controller-manager-/healthz"; log_tail "$STATE_DIR/kube-controller-manager.log"; }
    [ -n "${ready_at[sched]:-}" ] || { missing+=" kube-scheduler-/healthz"; log_tail "$STATE_DIR/kube-scheduler.log"; }
    [ -n "${ready_at[kwok]:-}" ] || { missing+=" kwok-/healthz"; log_tail "$STATE_DIR/kwok.log"; }
    [ -n "${ready_at[nodes]:-}" ] || { missing+=" nodes-Ready-and-untainted($n_ready/$NODES)"; [ -n "${ready_at[kwok]:-}" ] && log_tail "$STATE_DIR/kwok.log"; }
    [ -n "${ready_at[sa]:-}" ] || { missing+=" serviceaccount-default/default"; [ -n "${ready_at[kcm]:-}" ] && log_tail "$STATE_DIR/kube-controller-manager.log"; }
    [ -n "${ready_at[snapshots]:-}" ] || missing+=" snapshot-CRDs-Established"
    cp_die "node mode not ready after ${START_TIMEOUT}s; missing:$missing"
  fi
  cp_log "node mode ready in $(cp_elapsed "$t_nodes") (kube-controller-manager pid $(pid_of kube-controller-manager) /healthz at ${ready_at[kcm]}, kube-scheduler pid $(pid_of kube-scheduler) at ${ready_at[sched]}, kwok pid $(pid_of kwok) at ${ready_at[kwok]}, $NODES node(s) Ready at ${ready_at[nodes]}, default ServiceAccount at ${ready_at[sa]}, snapshot-controller pid $(pid_of snapshot-controller) with its CRDs Established at ${ready_at[snapshots]})"
  node_env="$(cat <<EOF
export NODE_NAMES='$NODE_NAMES'
export NODE_IP='$NODE_IP'
export POD_CIDR='$POD_CIDR'
export KWOK_NODE_ANNOTATION='$KWOK_NODE_ANNOTATION=$KWOK_NODE_ANNOTATION_VALUE'
export KWOK_CLUSTER_EXEC='$KWOK_CLUSTER_EXEC'
export KWOK_PORT='$KWOK_PORT'
export KWOK_URL='https://127.0.0.1:$KWOK_PORT'
export KWOK_PID='$(pid_of kwok)'
export KUBE_CONTROLLER_MANAGER_PORT='$KCM_PORT'
export KUBE_CONTROLLER_MANAGER_PID='$(pid_of kube-controller-manager)'
export KUBE_SCHEDULER_PORT='$SCHEDULER_PORT'
export KUBE_SCHEDULER_PID='$(pid_of kube-scheduler)'
export KUBE_CONTROLLER_MANAGER_BIN='$CP_KUBE_CONTROLLER_MANAGER'
export KUBE_SCHEDULER_BIN='$CP_KUBE_SCHEDULER'
export KWOK_BIN='$CP_KWOK'
export SNAPSHOT_CONTROLLER_PID='$(pid_of snapshot-controller)'
export SNAPSHOT_CONTROLLER_BIN='$CP_SNAPSHOT_CONTROLLER'
export EXTERNAL_SNAPSHOTTER_VERSION='$EXTERNAL_SNAPSHOTTER_VERSION'
EOF
)"
fi

# ---------------------------------------------------------------- real node
if [ "$REAL_NODES" -gt 0 ]; then
  "$CP_HERE/real-node.sh" up "$STATE_DIR"
  node_env="$node_env
$(cat "$STATE_DIR/node.env")"
fi

# ---------------------------------------------------------------- env
{
  cat <<EOF
# Written by hack/control-plane/up.sh; source it.
export CONTROL_PLANE_STATE_DIR='$STATE_DIR'
export KUBECONFIG='$STATE_DIR/kubeconfig'
export KUBECONFIG_ALICE='$STATE_DIR/kubeconfig-alice'
export KUBECONFIG_BOB='$STATE_DIR/kubeconfig-bob'
export APISERVER_URL='$APISERVER_URL'
export APISERVER_PORT='$API_PORT'
export APISERVER_CA='$pki/ca.crt'
export ETCD_URL='$ETCD_URL'
export APISERVER_PID='$api_pid'
export ETCD_PID='$etcd_pid'
export ADMIN_TOKEN='$ADMIN_TOKEN'
export ALICE_TOKEN='$ALICE_TOKEN'
export BOB_TOKEN='$BOB_TOKEN'
export KUBE_APISERVER_BIN='$CP_KUBE_APISERVER'
export ETCD_BIN='$CP_ETCD'
export SERVICE_CIDR='$SERVICE_CIDR'
export CONTROL_PLANE_NODES='$NODES'
export CONTROL_PLANE_REAL_NODES='$REAL_NODES'
EOF
  [ -z "$node_env" ] || printf '%s\n' "$node_env"
} >"$STATE_DIR/env"

started_ok=1
cp_log "control plane up in $(cp_elapsed "$t_up") (after build check); source $STATE_DIR/env"
