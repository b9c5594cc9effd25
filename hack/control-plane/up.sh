#!/usr/bin/env bash
# Start a real etcd + kube-apiserver on 127.0.0.1 (free ports) for integration
# tests, and wait until the apiserver's /readyz is ok.
#
# usage: up.sh STATE_DIR
#
# Writes into STATE_DIR:
#   kubeconfig, kubeconfig-alice, kubeconfig-bob   (token auth, CA embedded)
#   env                  shell-sourceable: KUBECONFIG, APISERVER_URL, pids, tokens, ...
#   etcd.pid, kube-apiserver.pid
#   etcd.log, kube-apiserver.log
#   pki/ (CA, serving cert, service-account keys), tokens.csv, etcd-data/
# An existing STATE_DIR may be reused after down.sh: certificates are kept,
# etcd-data is wiped (every start is an empty cluster).
#
# Environment:
#   OUTFIT_CP_START_TIMEOUT  seconds to wait for /readyz (default 90)
#   OUTFIT_CP_APISERVER_ARGS extra kube-apiserver flags (word-split)
#   OUTFIT_CACHE_DIR         see build.sh
# Stop with: down.sh STATE_DIR
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

[ $# -eq 1 ] || { sed -n '2,20p' "$0" >&2; exit 2; }
mkdir -p "$1"
STATE_DIR="$(cd "$1" && pwd)"
START_TIMEOUT="${OUTFIT_CP_START_TIMEOUT:-90}"

# Fixed, documented test tokens (see README.md). Never use them outside tests.
ADMIN_TOKEN="outfit-admin-token"
ALICE_TOKEN="outfit-alice-token"
BOB_TOKEN="outfit-bob-token"

for tool in curl openssl base64 setsid; do
  command -v "$tool" >/dev/null || cp_die "$tool is required"
done

# Refuse to start twice on the same state dir.
for name in etcd kube-apiserver; do
  if [ -f "$STATE_DIR/$name.pid" ] && kill -0 "$(cat "$STATE_DIR/$name.pid")" 2>/dev/null; then
    cp_die "$name is already running (pid $(cat "$STATE_DIR/$name.pid")) for $STATE_DIR; run down.sh first"
  fi
done

"$CP_HERE/build.sh"

t_up=$(cp_now_ms)

# ---------------------------------------------------------------- helpers
# A free TCP port on 127.0.0.1, below the ephemeral range so that outgoing
# connections cannot grab it between the check and the bind.
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

# start_daemon NAME LOG CMD... : start detached (own session, survives this
# script), write NAME.pid with the real pid of CMD.
start_daemon() {
  local name="$1" log="$2"; shift 2
  rm -f "$STATE_DIR/$name.pid"
  # shellcheck disable=SC2016 # $$ and $@ are for the inner bash
  setsid bash -c 'echo $$ >"$0"; exec "$@"' "$STATE_DIR/$name.pid" "$@" \
    </dev/null >>"$log" 2>&1 &
  local _
  for _ in $(seq 1 100); do
    [ -s "$STATE_DIR/$name.pid" ] && return 0
    sleep 0.05
  done
  cp_die "$name did not write its pid file"
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
fi
cat >"$STATE_DIR/tokens.csv" <<EOF
$ADMIN_TOKEN,outfit-admin,uid-outfit-admin,"system:masters"
$ALICE_TOKEN,alice,uid-alice,"team-a"
$BOB_TOKEN,bob,uid-bob,"team-b"
EOF
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
    --service-cluster-ip-range=10.96.0.0/16 \
    --allow-privileged=true \
    --enable-admission-plugins=MutatingAdmissionWebhook,ValidatingAdmissionWebhook \
    --disable-admission-plugins=StorageObjectInUseProtection \
    --profiling=false \
    --v=1 \
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
cp_log "kube-apiserver (pid $api_pid) ready at $APISERVER_URL in $(cp_elapsed "$t")"

# ---------------------------------------------------------------- kubeconfigs + env
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

cat >"$STATE_DIR/env" <<EOF
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
EOF

started_ok=1
cp_log "control plane up in $(cp_elapsed "$t_up") (after build check); source $STATE_DIR/env"
