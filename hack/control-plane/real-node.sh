#!/usr/bin/env bash
# A real node for the test cluster: a kubelet of the cluster's release that runs real containers
# through containerd 2 and runc (built by build.sh), with a CNI bridge whose pod addresses this machine
# reaches, pulling the project's own images from a local registry (the Distribution project's,
# tests/tools/registry). up.sh runs it for --real-nodes 1, down.sh stops it; by hand:
#
#   real-node.sh up STATE_DIR     after up.sh started STATE_DIR's control plane in node mode
#   real-node.sh down STATE_DIR   stops it and undoes what it changed on this machine (idempotent)
#
# ../shared/reference/real-node.md is where the recipe comes from (tried 2026-12-01), with its
# pitfalls; the comments below name the ones each setting answers.
#
# One real node per machine: the kubelet's port (10250), the bridge (outfit0, 10.88.0.1/24, which
# is also the node's address) and the host's sysctls and iptables chains are the machine's. A
# second up while one runs is refused and names the state directory that holds it.
#
# Writes STATE_DIR/node/ (configs, logs, the kubelet's root, containerd's root, the registry's
# storage, sysctl.before) and STATE_DIR/node.env (sourced into STATE_DIR/env by up.sh). Its
# runtime directory (containerd's state and sockets: shim sockets are unix sockets, whose paths
# must stay short) is /run/outfit-node.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

[ $# -eq 2 ] || { sed -n '2,19p' "$0" >&2; exit 2; }
action=$1
[ -d "$2" ] || { [ "$action" = down ] && exit 0; cp_die "$2 does not exist"; }
STATE_DIR="$(cd "$2" && pwd)"
NODE_DIR="$STATE_DIR/node"
RUN=/run/outfit-node
OWNER="$RUN/owner"          # the state directory whose node this is
NODE_NAME=outfit-node-0
BRIDGE=outfit0
NODE_IP=10.88.0.1
NODE_POD_CIDR=10.88.0.0/24
KUBELET_PORT=10250
REGISTRY_HOST=registry.outfit.test   # images are named for it; containerd maps it to the registry
NODE_TOKEN="outfit-node-0-token"     # in up.sh's tokens.csv with --real-nodes
PROXY_TOKEN="outfit-kube-proxy-token" # likewise, for system:kube-proxy
CSI_DRIVER=provisioner.outfit.test   # the provisioner stand-in's (outfit-test-support)
NO_USERNS_HANDLER=runc-without-userns  # a runtime handler (and RuntimeClass) of Debian's runc 1.1
START_TIMEOUT="${OUTFIT_CP_START_TIMEOUT:-90}"
REPO="$(cd "$CP_HERE/../.." && pwd)"
# The kubelet's changes to the host's sysctls (pitfall 3) and the bridge's ip_forward, restored
# by down from sysctl.before.
SYSCTLS="vm.overcommit_memory kernel.panic kernel.panic_on_oops net.ipv4.ip_forward"

pid_of() { cat "$NODE_DIR/$1.pid" 2>/dev/null || true; }

# start_daemon NAME CMD...: CMD detached, its pid in NODE_DIR/NAME.pid, its log NAME.log.
start_daemon() {
  local name=$1; shift
  cp_start_daemon "$NODE_DIR/$name.pid" "$NODE_DIR/$name.log" "$@"
}

# kubeconfig_as USER TOKEN FILE: the plane's admin kubeconfig, as USER by its static TOKEN.
kubeconfig_as() {
  sed -e "s/^- name: outfit-admin$/- name: $1/" -e "s/^    user: outfit-admin$/    user: $1/" \
      -e "s/^    token: .*/    token: $2/" "$STATE_DIR/kubeconfig" >"$3"
  chmod 600 "$3"
}

# wait_for WHAT SECONDS CMD...: until CMD succeeds, or dies naming WHAT and the log to read.
wait_for() {
  local what=$1 seconds=$2 log=$3; shift 3
  local deadline=$(( $(cp_now_ms) + seconds * 1000 ))
  until "$@" >/dev/null 2>&1; do
    if [ "$(cp_now_ms)" -gt "$deadline" ]; then
      printf -- '----- last 30 lines of %s -----\n' "$log" >&2
      tail -n 30 "$log" >&2 || true
      cp_die "$what not ready after ${seconds}s (log: $log)"
    fi
    sleep 0.2
  done
}

# ------------------------------------------------------------------------------------------- up
up() {
  for tool in runc iptables ipset ip openssl curl python3 jq socat; do
    command -v "$tool" >/dev/null || cp_die "$tool is required for a real node (hack/prepare.sh installs it)"
  done
  [ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] \
    || cp_die "the CNI plugins are required for a real node (Debian's containernetworking-plugins)"
  [ "$(id -u)" = 0 ] || cp_die "a real node runs containers: it needs root"
  for bin in "$CP_KUBELET" "$CP_KUBE_PROXY" "$CP_REGISTRY" "$CP_KUBE_ROUTER" "$CP_CSI_NODE" "$CP_CONTAINERD" "$CP_CTR" "$CP_RUNC"; do
    [ -x "$bin" ] || cp_die "no $bin (hack/control-plane/build.sh builds it)"
  done
  [ -f "$STATE_DIR/env" ] || [ -f "$STATE_DIR/kubeconfig" ] || cp_die "no control plane in $STATE_DIR (up.sh first)"
  if [ -e "$OWNER" ] && [ "$(cat "$OWNER")" != "$STATE_DIR" ] && [ -d "$(cat "$OWNER")/node" ]; then
    cp_die "this machine's real node belongs to $(cat "$OWNER") (real-node.sh down $(cat "$OWNER") first)"
  fi
  mkdir -p "$RUN" "$NODE_DIR"
  printf '%s\n' "$STATE_DIR" >"$OWNER"
  trap 'if [ "${node_started:-0}" != 1 ]; then cp_log "real node start-up failed; undoing it"; down >&2 || true; fi' EXIT
  local t_up t pki=$STATE_DIR/pki api_url admin_token
  t_up=$(cp_now_ms)
  api_url="$(sed -n "s/^    server: //p" "$STATE_DIR/kubeconfig")"
  admin_token="$(sed -n 's/^    token: //p' "$STATE_DIR/kubeconfig")"
  kapi() {   # METHOD PATH [JSON]: as the admin; the answer on stdout, fails on an HTTP error
    curl -fsS --max-time 10 --cacert "$pki/ca.crt" -H "Authorization: Bearer $admin_token" \
      -X "$1" -H 'Content-Type: application/json' ${3:+--data-binary "$3"} "$api_url$2"
  }

  : >"$NODE_DIR/sysctl.before"
  for s in $SYSCTLS; do printf '%s=%s\n' "$s" "$(sysctl -n "$s")" >>"$NODE_DIR/sysctl.before"; done

  # The kubelet's serving certificate, for the API server's --kubelet-certificate-authority.
  if [ ! -s "$pki/$NODE_NAME.crt" ]; then
    (
      cd "$pki"; umask 077
      openssl ecparam -genkey -name prime256v1 -noout -out "$NODE_NAME.key" 2>/dev/null
      openssl req -new -key "$NODE_NAME.key" -subj "/CN=system:node:$NODE_NAME/O=system:nodes" -out "$NODE_NAME.csr"
      printf '%s\n' "basicConstraints=critical,CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" \
        "extendedKeyUsage=serverAuth" "subjectAltName=IP:$NODE_IP,IP:127.0.0.1,DNS:$NODE_NAME" >"$NODE_NAME.ext"
      openssl x509 -req -in "$NODE_NAME.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -sha256 \
        -extfile "$NODE_NAME.ext" -out "$NODE_NAME.crt" 2>/dev/null
      chmod 644 "$NODE_NAME.crt"
    )
  fi
  kubeconfig_as "system:node:$NODE_NAME" "$NODE_TOKEN" "$NODE_DIR/kubeconfig"

  # The bridge with the node's address, before the kubelet binds it; CNI's bridge plugin takes it
  # over as the pods' gateway.
  ip link show "$BRIDGE" >/dev/null 2>&1 || ip link add "$BRIDGE" type bridge
  ip addr replace "$NODE_IP/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up

  # ---- registry
  t=$(cp_now_ms)
  local registry_port
  registry_port=$(free_port)
  mkdir -p "$NODE_DIR/registry"
  cat >"$NODE_DIR/registry.yaml" <<EOF
version: 0.1
log: {level: warn, accesslog: {disabled: true}}
storage: {filesystem: {rootdirectory: $NODE_DIR/registry}, delete: {enabled: true}}
http: {addr: 127.0.0.1:$registry_port}
EOF
  : >"$NODE_DIR/registry.log"
  OTEL_TRACES_EXPORTER=none start_daemon registry "$CP_REGISTRY" serve "$NODE_DIR/registry.yaml"
  wait_for "the registry" 30 "$NODE_DIR/registry.log" curl -fsS --max-time 1 "http://127.0.0.1:$registry_port/v2/"
  python3 "$REPO/tests/tools/node-images/build.py" --registry "127.0.0.1:$registry_port" \
    >"$NODE_DIR/images.log" 2>&1 || { cat "$NODE_DIR/images.log" >&2; cp_die "building or pushing the node images failed"; }
  cp_log "registry (pid $(pid_of registry)) at 127.0.0.1:$registry_port with the project's images in $(cp_elapsed "$t")"
  # The node pulls through a link of OUTFIT_CP_REGISTRY_MBPS megabytes a second, if set (the
  # start-time benchmark: pulls cost what they do on a site); pushes go to the registry directly.
  local pull_port=$registry_port
  if [ -n "${OUTFIT_CP_REGISTRY_MBPS:-}" ]; then
    pull_port=$(free_port)
    : >"$NODE_DIR/throttle.log"
    start_daemon throttle python3 "$CP_HERE/throttle.py" "$pull_port" "$registry_port" "$OUTFIT_CP_REGISTRY_MBPS"
    wait_for "the registry's throttle" 10 "$NODE_DIR/throttle.log" curl -fsS --max-time 1 "http://127.0.0.1:$pull_port/v2/"
    cp_log "pulls through 127.0.0.1:$pull_port at $OUTFIT_CP_REGISTRY_MBPS MB/s"
  fi

  # ---- containerd
  t=$(cp_now_ms)
  mkdir -p "$NODE_DIR/cni" "$NODE_DIR/net.d" "$NODE_DIR/certs.d/$REGISTRY_HOST"
  # The registry by its stable name, over plain HTTP (the CRI's pulls, the sandbox's too).
  cat >"$NODE_DIR/certs.d/$REGISTRY_HOST/hosts.toml" <<EOF
server = "http://127.0.0.1:$pull_port"
[host."http://127.0.0.1:$pull_port"]
  capabilities = ["pull", "resolve"]
EOF
  cat >"$NODE_DIR/net.d/10-outfit.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "outfit", "plugins": [
  {"type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": "$NODE_DIR/cni", "ranges": [[{"subnet": "$NODE_POD_CIDR", "gateway": "$NODE_IP"}]],
            "routes": [{"dst": "0.0.0.0/0"}]}}
]}
EOF
  # containerd 2 and runc 1.5 (built): user namespaces (hostUsers: false), with idmapped mounts.
  # Its second runtime handler, $NO_USERNS_HANDLER, runs Debian's runc 1.1, which has no idmapped
  # mounts, so containerd reports that handler without user namespaces, as a node of containerd
  # 1.6 or runc 1.1 is: the RuntimeClass of the same name shows what such a node answers.
  cat >"$NODE_DIR/containerd.toml" <<EOF
version = 3
root = "$NODE_DIR/containerd"
state = "$RUN/containerd"
[grpc]
  address = "$RUN/containerd.sock"
[ttrpc]
  address = "$RUN/containerd.sock.ttrpc"
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "$REGISTRY_HOST/outfit-test/pause:1"
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = "$NODE_DIR/certs.d"
[plugins.'io.containerd.cri.v1.runtime']
  # Network namespaces under the state directory, not /var/run/netns (pitfall 10).
  netns_mounts_under_state_dir = true
  # Root here lacks CAP_SYS_RESOURCE: runc cannot lower oom_score_adj (pitfall 1).
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "$CP_RUNC"
        SystemdCgroup = false
        Root = "$RUN/runc"                  # runc's state, not /run/containerd/runc
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.$NO_USERNS_HANDLER]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.$NO_USERNS_HANDLER.options]
        BinaryName = "$(command -v runc)"
        SystemdCgroup = false
        Root = "$RUN/runc"
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "$NODE_DIR/net.d"
EOF
  : >"$NODE_DIR/containerd.log"
  # Its shim from beside it, not a containerd-shim-runc-v2 of the machine's.
  start_daemon containerd env "PATH=$CP_RUNTIME_DIR:$PATH" "$CP_CONTAINERD" --config "$NODE_DIR/containerd.toml" --log-level warn
  wait_for containerd 30 "$NODE_DIR/containerd.log" "$CP_CTR" --address "$RUN/containerd.sock" version
  cp_log "containerd v$CONTAINERD_VERSION (pid $(pid_of containerd)) in $(cp_elapsed "$t")"

  # ---- kubelet
  t=$(cp_now_ms)
  # The Node made ahead, as a provisioner makes one, for its pod range: the kubelet registers into
  # it, and kube-router reads which addresses are pods from it.
  kapi POST /api/v1/nodes "$(jq -cn --arg n "$NODE_NAME" --arg cidr "$NODE_POD_CIDR" '{
    apiVersion: "v1", kind: "Node",
    metadata: {name: $n, labels: {"kubernetes.io/hostname": $n, "kubernetes.io/os": "linux", "outfit.dev/node": "real"}},
    spec: {podCIDR: $cidr, podCIDRs: [$cidr]}}')" >/dev/null
  mkdir -p "$NODE_DIR/kubelet" "$NODE_DIR/pod-logs"
  cat >"$NODE_DIR/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
failSwapOn: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$RUN/containerd.sock
address: $NODE_IP
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 0
tlsCertFile: $pki/$NODE_NAME.crt
tlsPrivateKeyFile: $pki/$NODE_NAME.key
authentication: {anonymous: {enabled: false}, webhook: {enabled: true}, x509: {clientCAFile: $pki/ca.crt}}
authorization: {mode: Webhook}
serializeImagePulls: false
resolvConf: /etc/resolv.conf
podLogsDir: $NODE_DIR/pod-logs
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 99
imageGCLowThresholdPercent: 98
nodeStatusReportFrequency: 10s
podPidsLimit: -1
# Images present under a second name would count as never pulled (pitfall 2).
imagePullCredentialsVerificationPolicy: NeverVerify
EOF
  : >"$NODE_DIR/kubelet.log"
  start_daemon kubelet "$CP_KUBELET" --config="$NODE_DIR/kubelet.yaml" --kubeconfig="$NODE_DIR/kubeconfig" \
    --root-dir="$NODE_DIR/kubelet" --cert-dir="$NODE_DIR/kubelet/pki" --hostname-override="$NODE_NAME" \
    --node-ip="$NODE_IP" --v=1
  node_ready() {
    kapi GET "/api/v1/nodes/$NODE_NAME" | jq -e '
      any(.status.conditions[]?; .type == "Ready" and .status == "True")
      and all(.spec.taints[]?; .key != "node.kubernetes.io/not-ready")'
  }
  wait_for "the kubelet's node $NODE_NAME" "$START_TIMEOUT" "$NODE_DIR/kubelet.log" node_ready
  kapi POST /apis/node.k8s.io/v1/runtimeclasses "$(jq -cn --arg h "$NO_USERNS_HANDLER" '{
    apiVersion: "node.k8s.io/v1", kind: "RuntimeClass", metadata: {name: $h}, handler: $h}')" >/dev/null
  cp_log "kubelet (pid $(pid_of kubelet)) with node $NODE_NAME Ready in $(cp_elapsed "$t")"

  # ---- the node side of the CSI driver provisioner.outfit.test (tests/tools/csi-node): the
  # kubelet mounts a claim's volume by bind-mounting its directory of STATE_DIR/node-local-volumes,
  # which the provisioner stand-in (in the test process) makes, copies for snapshots and restores.
  t=$(cp_now_ms)
  local registration="$NODE_DIR/kubelet/plugins_registry/outfit-csi.sock"
  # A unix socket's path holds at most 107 bytes.
  [ "${#registration}" -le 107 ] \
    || cp_die "the CSI registration socket's path is too long for a unix socket (${#registration} bytes): $registration; use a shorter STATE_DIR"
  mkdir -p "$STATE_DIR/node-local-volumes" "$(dirname "$registration")"
  : >"$NODE_DIR/csi-node.log"
  start_daemon csi-node "$CP_CSI_NODE" --driver="$CSI_DRIVER" --node-id="$NODE_NAME" \
    --volumes-dir="$STATE_DIR/node-local-volumes" --endpoint="$RUN/csi.sock" --registration="$registration"
  csi_registered() {
    kapi GET "/apis/storage.k8s.io/v1/csinodes/$NODE_NAME" \
      | jq -e --arg d "$CSI_DRIVER" 'any(.spec.drivers[]?; .name == $d)'
  }
  wait_for "the CSI driver's registration with the kubelet" 30 "$NODE_DIR/csi-node.log" csi_registered
  cp_log "csi-node (pid $(pid_of csi-node)) registered as $CSI_DRIVER in $(cp_elapsed "$t")"

  # ---- kube-router's firewall: NetworkPolicies enforced (the bridge CNI enforces none). Pod to
  # pod traffic on one bridge crosses iptables only with bridge-nf-call-iptables.
  t=$(cp_now_ms)
  [ "$(sysctl -n net.bridge.bridge-nf-call-iptables 2>/dev/null)" = 1 ] \
    || cp_die "net.bridge.bridge-nf-call-iptables is not 1: NetworkPolicies would not apply between pods of the node"
  local router_health
  router_health=$(free_port)
  : >"$NODE_DIR/kube-router.log"
  start_daemon kube-router "$CP_KUBE_ROUTER" --kubeconfig="$STATE_DIR/kubeconfig" \
    --hostname-override="$NODE_NAME" --run-firewall=true --run-router=false --run-service-proxy=false \
    --enable-cni=false --service-cluster-ip-range=10.96.0.0/16 --health-port="$router_health" \
    --metrics-port=0 --v=1
  wait_for kube-router 30 "$NODE_DIR/kube-router.log" curl -fsS --max-time 1 "http://127.0.0.1:$router_health/healthz"
  cp_log "kube-router (pid $(pid_of kube-router)) enforcing NetworkPolicies in $(cp_elapsed "$t")"

  # ---- the API server's in-cluster address (the Service default/kubernetes, 10.96.0.1:443), for
  # pods such as outfit's own: the API server listens on 127.0.0.1 alone, which no pod reaches, so
  # socat carries the node's address to it, and the Service's endpoints (which the API server,
  # with --endpoint-reconciler-type=none, leaves to us) name the node's address. TLS passes
  # through: the API server's certificate names 10.96.0.1.
  t=$(cp_now_ms)
  local api_port=${api_url##*:}
  : >"$NODE_DIR/api-forward.log"
  start_daemon api-forward socat "TCP-LISTEN:$api_port,bind=$NODE_IP,fork,reuseaddr" "TCP:127.0.0.1:$api_port"
  kapi POST /api/v1/namespaces/default/endpoints "$(jq -cn --arg ip "$NODE_IP" --argjson port "$api_port" '{
    apiVersion: "v1", kind: "Endpoints",
    metadata: {name: "kubernetes", labels: {"endpointslice.kubernetes.io/skip-mirror": "true"}},
    subsets: [{addresses: [{ip: $ip}], ports: [{name: "https", port: $port, protocol: "TCP"}]}]}')" >/dev/null
  kapi POST /apis/discovery.k8s.io/v1/namespaces/default/endpointslices "$(jq -cn --arg ip "$NODE_IP" --argjson port "$api_port" '{
    apiVersion: "discovery.k8s.io/v1", kind: "EndpointSlice",
    metadata: {name: "kubernetes", labels: {"kubernetes.io/service-name": "kubernetes",
                                            "endpointslice.kubernetes.io/managed-by": "real-node.sh.outfit.dev"}},
    addressType: "IPv4",
    endpoints: [{addresses: [$ip], conditions: {ready: true}}],
    ports: [{name: "https", port: $port, protocol: "TCP"}]}')" >/dev/null

  # ---- kube-proxy (iptables): Services' addresses, for pods and for this machine (the API server
  # calls a webhook at its Service's address). As system:kube-proxy, whose rights (the bootstrap
  # role system:node-proxier) are all it needs.
  local proxy_health proxy_metrics
  proxy_health=$(free_port)
  proxy_metrics=$(free_port)
  kubeconfig_as system:kube-proxy "$PROXY_TOKEN" "$NODE_DIR/kube-proxy.kubeconfig"
  cat >"$NODE_DIR/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: {kubeconfig: $NODE_DIR/kube-proxy.kubeconfig}
hostnameOverride: $NODE_NAME
clusterCIDR: $NODE_POD_CIDR
healthzBindAddress: 127.0.0.1:$proxy_health
metricsBindAddress: 127.0.0.1:$proxy_metrics
# NodePorts on the node's address only, not on 127.0.0.1 (which would set route_localnet); the
# host's conntrack table and timeouts left as they are.
nodePortAddresses: ["$NODE_IP/32"]
iptables: {localhostNodePorts: false}
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
  : >"$NODE_DIR/kube-proxy.log"
  start_daemon kube-proxy "$CP_KUBE_PROXY" --config="$NODE_DIR/kube-proxy.yaml" --v=1
  wait_for kube-proxy 30 "$NODE_DIR/kube-proxy.log" curl -fsS --max-time 1 "http://127.0.0.1:$proxy_health/healthz"
  cp_log "kube-proxy (pid $(pid_of kube-proxy)) and the API server at $NODE_IP:$api_port for pods in $(cp_elapsed "$t")"

  cat >"$STATE_DIR/node.env" <<EOF
export REAL_NODE_NAMES='$NODE_NAME'
export REAL_NODE_IP='$NODE_IP'
export REAL_NODE_POD_CIDR='$NODE_POD_CIDR'
export REAL_NODE_DIR='$NODE_DIR'
export REGISTRY_URL='http://127.0.0.1:$registry_port'
export REGISTRY_HOST='$REGISTRY_HOST'
export CONTAINERD_ADDRESS='$RUN/containerd.sock'
export KUBELET_BIN='$CP_KUBELET'
export KUBELET_PID='$(pid_of kubelet)'
export RUNTIME_CLASS_WITHOUT_USERNS='$NO_USERNS_HANDLER'
export CTR_BIN='$CP_CTR'
export REGISTRY_PULL_MBPS='${OUTFIT_CP_REGISTRY_MBPS:-}'
export JUPYTERLAB_VENV='$CP_JUPYTERLAB_VENV'
EOF
  node_started=1
  cp_log "real node up in $(cp_elapsed "$t_up")"
}

# free_port: a free TCP port on 127.0.0.1 below the ephemeral range.
free_port() {
  local p _
  for _ in $(seq 1 200); do
    p=$(( 20000 + (RANDOM * 32768 + RANDOM) % 12000 ))
    [ -z "$(ss -Htan "( sport = :$p )" 2>/dev/null)" ] && { echo "$p"; return 0; }
  done
  cp_die "no free port found"
}

# ----------------------------------------------------------------------------------------- down
# stop NAME: TERM, then KILL after 10 s, if the pid file's process still names NODE_DIR.
stop() {
  local pid cmdline _
  pid=$(pid_of "$1"); [ -n "$pid" ] || return 0
  cmdline="$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline")" || true
  # Ours if it names the node's directories, or (socat) listens on the node's address.
  case "$cmdline" in *"$STATE_DIR/"*|*"$RUN/"*|*"bind=$NODE_IP,"*) ;; *) rm -f "$NODE_DIR/$1.pid"; return 0 ;; esac
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do cp_running "$pid" || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$NODE_DIR/$1.pid"
}

down() {
  local ctr=("$CP_CTR" --address "$RUN/containerd.sock" -n k8s.io) id pid
  [ -d "$NODE_DIR" ] || return 0
  if [ -e "$OWNER" ] && [ "$(cat "$OWNER")" != "$STATE_DIR" ]; then
    cp_log "this machine's real node belongs to $(cat "$OWNER"), not $STATE_DIR: left alone"
    return 0
  fi
  # The pods first, while the kubelet and containerd run: the kubelet stops their sandboxes,
  # which runs CNI's DEL. Bounded: whatever is left is killed below.
  if [ -S "$RUN/containerd.sock" ] && [ -n "$(pid_of kubelet)" ] && [ -s "$STATE_DIR/kubeconfig" ]; then
    local api_url token
    api_url="$(sed -n "s/^    server: //p" "$STATE_DIR/kubeconfig")"
    token="$(sed -n 's/^    token: //p' "$STATE_DIR/kubeconfig")"
    local kcurl=(curl -sS --max-time 5 --cacert "$STATE_DIR/pki/ca.crt" -H "Authorization: Bearer $token")
    "${kcurl[@]}" "$api_url/api/v1/pods?fieldSelector=spec.nodeName%3D$NODE_NAME" 2>/dev/null \
      | jq -r '.items[]? | "\(.metadata.namespace)/\(.metadata.name)"' 2>/dev/null \
      | while IFS=/ read -r ns name; do
          "${kcurl[@]}" -X DELETE -H 'Content-Type: application/json' -d '{"gracePeriodSeconds": 0}' \
            "$api_url/api/v1/namespaces/$ns/pods/$name" >/dev/null 2>&1 || true
        done
    for _ in $(seq 1 50); do
      [ -z "$("${ctr[@]}" tasks ls -q 2>/dev/null)" ] && break
      sleep 0.2
    done
  fi
  if [ -S "$RUN/containerd.sock" ] && [ -n "$(pid_of containerd)" ]; then
    stop kubelet
    for id in $("${ctr[@]}" tasks ls -q 2>/dev/null); do
      "${ctr[@]}" tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
    done
    sleep 0.3
    for id in $("${ctr[@]}" tasks ls -q 2>/dev/null); do "${ctr[@]}" tasks delete -f "$id" >/dev/null 2>&1 || true; done
    for id in $("${ctr[@]}" containers ls -q 2>/dev/null); do "${ctr[@]}" containers delete "$id" >/dev/null 2>&1 || true; done
  fi
  stop kube-router
  stop csi-node
  stop kube-proxy
  stop api-forward
  stop kubelet
  stop containerd
  stop registry
  stop throttle
  # Shims outlive containerd (pitfall 6).
  for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $RUN/containerd.sock" || true); do
    kill -KILL "$pid" 2>/dev/null || true
  done
  # Mounts under the node's directories, deepest first (pitfall 5).
  local m
  for m in $(awk '{print $2}' /proc/self/mounts | grep -E "^($NODE_DIR|$RUN)(/|$)" | sort -r); do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done
  # The pods' network: their veths went with their namespaces; the bridge and the IPAM's leases.
  ip link del "$BRIDGE" 2>/dev/null || true
  # The kubelet's cgroups (cgroupfs driver), in every v1 hierarchy.
  find /sys/fs/cgroup/*/kubepods -depth -type d -exec rmdir {} + 2>/dev/null || true
  # The kubelet's and kube-router's iptables chains (pitfall 4; kube-router's --cleanup-config
  # panics in v2.1.0): each table restored without the KUBE- chains and the rules that jump to
  # them, everything else as it is. Rules carry quoted comments, which a shell loop would split.
  # IPv6's tables too: the kubelet and kube-proxy make their chains in both families.
  local table family
  for family in ip ip6; do
    command -v "${family}tables-save" >/dev/null || continue
    for table in filter nat mangle raw; do
      "${family}tables-save" -t "$table" 2>/dev/null | grep -q -- 'KUBE-' || continue
      "${family}tables-save" -t "$table" | grep -v -E -- '^:KUBE-|^-A KUBE-|-j KUBE-' \
        | "${family}tables-restore" -T "$table" \
        || cp_log "could not remove the KUBE- chains of the $family $table table"
    done
  done
  # kube-router's ipsets (its --cleanup-config panics in v2.1.0: the reference's pitfall), once no
  # rule refers to them.
  local set
  for set in $(ipset list -n 2>/dev/null | grep -E '^(KUBE-|kube-router)' || true); do
    ipset destroy "$set" 2>/dev/null || true
  done
  if [ -s "$NODE_DIR/sysctl.before" ]; then
    sysctl -q -p "$NODE_DIR/sysctl.before" >/dev/null 2>&1 || true
  fi
  # What the kubelet, containerd and CNI write outside the directories they are given: the
  # kubelet's links to the pods' logs (/var/log/containers) and its device-plugin socket
  # (/var/lib/kubelet/device-plugins, a fixed path), CNI's cache of results (/var/lib/cni), the
  # shims' sockets (/run/containerd/s): ours go, and each directory if that left it empty.
  local link
  for link in /var/log/containers/*; do
    [ -L "$link" ] || continue
    case "$(readlink "$link")" in "$NODE_DIR/"*) rm -f "$link" ;; esac
  done
  local other_kubelet=0
  for pid in $(pgrep -x kubelet || true); do cp_running "$pid" && other_kubelet=1; done
  [ "$other_kubelet" = 1 ] || rm -f /var/lib/kubelet/device-plugins/kubelet.sock
  rm -f /var/lib/cni/results/outfit-* 2>/dev/null || true
  rmdir /var/log/containers /var/lib/kubelet/device-plugins /var/lib/kubelet /var/lib/cni/results \
    /var/lib/cni /run/containerd/s /run/containerd/runc/k8s.io /run/containerd/runc /run/containerd 2>/dev/null || true
  rm -rf "$RUN"
  cp_log "real node stopped and the host restored ($NODE_DIR)"
}

case "$action" in
  up) up ;;
  down) down ;;
  *) sed -n '2,19p' "$0" >&2; exit 2 ;;
esac
