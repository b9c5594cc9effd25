#!/usr/bin/env bash
# Smoke-test a control plane started by `up.sh --nodes N` (kube-controller-
# manager, kube-scheduler and kwok with fake nodes), with curl and jq, plus
# python3 for the WebSocket exec checks (ws-exec.py; skipped without python3).
#
# usage: smoke-nodes.sh STATE_DIR
#
# Checks: nodes Ready/untainted with the kwok endpoint, `default`
# ServiceAccount and kube-root-ca.crt in a fresh namespace, aggregated
# ClusterRoles, a Pod scheduled to a fake node with a pod IP and hostIP and
# Ready, an EndpointSlice for a Service selecting it, pods/exec (WebSocket
# v5.channel.k8s.io and v4.channel.k8s.io) running `cat` on this machine,
# pods/log from a kwok ClusterLogs file,
# garbage collection of a Service owned by the Pod, Pod deletion with the
# default grace period, PV/PVC binding (storageClassName nfs), a Deployment
# and a Job, and namespace deletion. Prints "N passed, N failed".
set -euo pipefail

[ $# -eq 1 ] || { sed -n '2,16p' "$0" >&2; exit 2; }
# shellcheck disable=SC1091
. "$1/env"
command -v jq >/dev/null || { echo "jq is required" >&2; exit 2; }
[ "${CONTROL_PLANE_NODES:-0}" -gt 0 ] || { echo "$1 was not started with up.sh --nodes N" >&2; exit 2; }
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

passed=0 failed=0 skipped=0
ok()   { passed=$((passed + 1)); printf 'ok   - %s\n' "$*"; }
fail() { failed=$((failed + 1)); printf 'FAIL - %s\n' "$*"; }
skip() { skipped=$((skipped + 1)); printf 'skip - %s\n' "$*"; }
check() {   # DESCRIPTION COMMAND...
  local d="$1"; shift
  if "$@"; then ok "$d"; else fail "$d"; fi
}

# api TOKEN METHOD PATH [BODY] -> body on stdout, HTTP code in $code_file
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
code_file="$tmp/code"
api() {
  local token="$1" method="$2" path="$3" body="${4:-}"
  local args=(-sS --max-time 20 --cacert "$APISERVER_CA" -H "Authorization: Bearer $token"
              -H 'Accept: application/json' -X "$method" -w '\n%{http_code}')
  [ -z "$body" ] || args+=(-H 'Content-Type: application/json' --data-binary "$body")
  local out
  out="$(curl "${args[@]}" "$APISERVER_URL$path")"
  printf '%s' "${out##*$'\n'}" >"$code_file"
  printf '%s\n' "${out%$'\n'*}"
}
code() { cat "$code_file"; }
jqt() { jq -e "$1" <<<"$2" >/dev/null; }   # FILTER JSON: true/false
now_ms() { date +%s%3N; }
since() { local d=$(( $(now_ms) - $1 )); printf '%d.%03ds' $(( d / 1000 )) $(( d % 1000 )); }

# wait_json PATH FILTER SECONDS: poll GET PATH (as admin) every 0.1 s until
# FILTER is true; the last body is in $last. 0 on success.
last=""
wait_json() {
  local path="$1" filter="$2" n=$(( $3 * 10 )) _
  for _ in $(seq 1 "$n"); do
    last="$(api "$ADMIN_TOKEN" GET "$path")"
    if [ "$(code)" = 200 ] && jqt "$filter" "$last"; then return 0; fi
    sleep 0.1
  done
  return 1
}
# wait_code PATH CODE SECONDS: poll GET PATH until it returns CODE.
wait_code() {
  local path="$1" want="$2" n=$(( $3 * 10 )) _
  for _ in $(seq 1 "$n"); do
    api "$ADMIN_TOKEN" GET "$path" >/dev/null
    [ "$(code)" = "$want" ] && return 0
    sleep 0.1
  done
  return 1
}

NS="smoke-nodes-$(date +%s)-$RANDOM"
pod_json() {   # NAME [LABELS_JSON]
  jq -cn --arg n "$1" --argjson l "${2:-{\}}" \
    '{apiVersion:"v1",kind:"Pod",metadata:{name:$n,labels:$l},
      spec:{containers:[{name:"main",image:"registry.example/busybox:1",command:["sleep","3600"],
                         ports:[{containerPort:8080}]}]}}'
}

# ---------------------------------------------------------------- nodes
out="$(api "$ADMIN_TOKEN" GET /api/v1/nodes)"
check "$CONTROL_PLANE_NODES fake node(s) Ready, untainted, InternalIP $NODE_IP, kubelet port $KWOK_PORT, podCIDR in 10.244.0.0/16" \
  jqt '[.items[] | select(.metadata.annotations["kwok.x-k8s.io/node"] == "fake")
        | select(any(.status.conditions[]; .type == "Ready" and .status == "True"))
        | select((.spec.taints // []) | length == 0)
        | select(any(.status.addresses[]; .type == "InternalIP" and .address == "'"$NODE_IP"'"))
        | select(.status.daemonEndpoints.kubeletEndpoint.Port == '"$KWOK_PORT"')
        | select(.spec.podCIDR | startswith("10.244."))] | length == '"$CONTROL_PLANE_NODES" "$out"

# ---------------------------------------------------------------- namespace, SA, root CA, RBAC aggregation
api "$ADMIN_TOKEN" POST /api/v1/namespaces "{\"metadata\":{\"name\":\"$NS\"}}" >/dev/null
check "admin creates namespace $NS (201)" test "$(code)" = 201
t=$(now_ms)
check "ServiceAccount default appears in $NS (serviceaccount controller)" \
  wait_code "/api/v1/namespaces/$NS/serviceaccounts/default" 200 10
check "ConfigMap kube-root-ca.crt appears in $NS (root-ca publisher), $(since "$t")" \
  wait_json "/api/v1/namespaces/$NS/configmaps/kube-root-ca.crt" '.data["ca.crt"] | startswith("-----BEGIN CERTIFICATE-----")' 10
check "ClusterRole edit has aggregated rules (clusterrole-aggregation controller)" \
  wait_json /apis/rbac.authorization.k8s.io/v1/clusterroles/edit '(.rules // []) | length > 10' 10

# ---------------------------------------------------------------- pod lifecycle
t=$(now_ms)
api "$ADMIN_TOKEN" POST "/api/v1/namespaces/$NS/pods" "$(pod_json web '{"app":"web"}')" >/dev/null
check "admin creates pod web (201)" test "$(code)" = 201
if wait_json "/api/v1/namespaces/$NS/pods/web" \
     '.status.phase == "Running" and any(.status.conditions[]?; .type == "Ready" and .status == "True")' 10; then
  ok "pod web Running and Ready in $(since "$t")"
else
  fail "pod web Running and Ready within 10 s: $(jq -c .status <<<"$last")"
fi
pod="$last"
node="$(jq -r '.spec.nodeName // ""' <<<"$pod")"
pod_ip="$(jq -r '.status.podIP // ""' <<<"$pod")"
pod_uid="$(jq -r .metadata.uid <<<"$pod")"
check "pod web scheduled to a fake node ($node in: $NODE_NAMES)" grep -qw -- "$node" <<<"$NODE_NAMES"
check "pod web has pod IP $pod_ip in $POD_CIDR and hostIP $NODE_IP" \
  jqt '(.status.podIP | startswith("10.244.")) and .status.hostIP == "'"$NODE_IP"'"
       and (.status.podIPs | length == 1) and .status.containerStatuses[0].ready == true' "$pod"

# ---------------------------------------------------------------- service + endpoint slice
svc="$(jq -cn '{apiVersion:"v1",kind:"Service",metadata:{name:"web"},
  spec:{selector:{app:"web"},ports:[{port:80,targetPort:8080}]}}')"
out="$(api "$ADMIN_TOKEN" POST "/api/v1/namespaces/$NS/services" "$svc")"
check "admin creates Service web (201), clusterIP $(jq -r .spec.clusterIP <<<"$out") in $SERVICE_CIDR" \
  jqt '.spec.clusterIP | startswith("10.96.")' "$out"
t=$(now_ms)
if wait_json "/apis/discovery.k8s.io/v1/namespaces/$NS/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3Dweb" \
     'any(.items[].endpoints[]?; .addresses[0] == "'"$pod_ip"'" and .conditions.ready == true)' 10; then
  ok "EndpointSlice for Service web lists $pod_ip ready (endpointslice controller, $(since "$t"))"
else
  fail "EndpointSlice for Service web lists $pod_ip: $(jq -c '[.items[].endpoints]' <<<"$last")"
fi

# ---------------------------------------------------------------- exec through kwok
secret_file="/tmp/outfit-smoke-nodes-$$-$RANDOM"
secret="exec-content-$RANDOM-$RANDOM"
printf '%s\n' "$secret" >"$secret_file"
if command -v python3 >/dev/null; then
  for proto in v5.channel.k8s.io v4.channel.k8s.io; do
    out="$(python3 "$HERE/ws-exec.py" --protocol "$proto" --container main "$NS" web cat "$secret_file" || true)"
    check "exec (WebSocket $proto) 'cat $secret_file' returns the file content" \
      jqt '.http == 101 and .protocol == "'"$proto"'" and .stdout == "'"$secret"'\n" and .status.status == "Success"' "$out"
  done
  out="$(python3 "$HERE/ws-exec.py" "$NS" web cat "$secret_file.missing" || true)"
  # kwok (unlike a kubelet) does not report reason NonZeroExitCode with an
  # ExitCode cause: it wraps the exit error, so the status is InternalError
  # (code 500) and the exit code is only in the message ("exit status 1").
  check "exec of a failing command: stderr, status Failure/InternalError, message 'exit status 1'" \
    jqt '.status.status == "Failure" and .status.reason == "InternalError"
         and (.status.message | endswith("exit status 1"))
         and (.stderr | contains("No such file"))' "$out"
  out="$(TOKEN="$ALICE_TOKEN" python3 "$HERE/ws-exec.py" "$NS" web cat "$secret_file" || true)"
  check "exec as alice (no RBAC) is refused with 403" jqt '.http == 403' "$out"
else
  skip "exec checks need python3 (ws-exec.py)"
fi
rm -f "$secret_file"

# ---------------------------------------------------------------- pods/log through kwok
# kwok serves logs only from files named by a Logs/ClusterLogs object, in CRI
# log format ("<RFC3339Nano> stdout|stderr F <line>").
log_file="$tmp/web.log"
printf '2026-01-01T00:00:00.000000000Z stdout F first line\n2026-01-01T00:00:01.000000000Z stderr F second line\n' >"$log_file"
chmod 644 "$log_file"
cl_name="smoke-nodes-logs-$RANDOM$RANDOM"
cl="$(jq -cn --arg n "$cl_name" --arg ns "$NS" --arg f "$log_file" '{apiVersion:"kwok.x-k8s.io/v1alpha1",kind:"ClusterLogs",
  metadata:{name:$n},spec:{selector:{matchNamespaces:[$ns]},logs:[{logsFile:$f}]}}')"
api "$ADMIN_TOKEN" POST /apis/kwok.x-k8s.io/v1alpha1/clusterlogs "$cl" >/dev/null
check "admin creates ClusterLogs $cl_name for $NS (201)" test "$(code)" = 201
got=""
for _ in $(seq 1 50); do   # kwok's informer picks it up; <= 5 s
  got="$(curl -sS --max-time 10 --cacert "$APISERVER_CA" -H "Authorization: Bearer $ADMIN_TOKEN" \
         "$APISERVER_URL/api/v1/namespaces/$NS/pods/web/log?container=main")"
  [ "$got" = $'first line\nsecond line' ] && break
  sleep 0.1
done
check "pods/log returns the ClusterLogs file's lines" test "$got" = $'first line\nsecond line'
api "$ADMIN_TOKEN" DELETE "/apis/kwok.x-k8s.io/v1alpha1/clusterlogs/$cl_name" >/dev/null

# ---------------------------------------------------------------- garbage collection
owned="$(jq -cn --arg uid "$pod_uid" '{apiVersion:"v1",kind:"Service",
  metadata:{name:"owned-by-web",ownerReferences:[{apiVersion:"v1",kind:"Pod",name:"web",uid:$uid}]},
  spec:{ports:[{port:80}]}}')"
api "$ADMIN_TOKEN" POST "/api/v1/namespaces/$NS/services" "$owned" >/dev/null
check "admin creates Service owned-by-web with ownerReference to pod web (201)" test "$(code)" = 201

# ---------------------------------------------------------------- pod deletion (default grace)
t=$(now_ms)
out="$(api "$ADMIN_TOKEN" DELETE "/api/v1/namespaces/$NS/pods/web")"
check "DELETE pod web (default grace) returns 200 with a deletionTimestamp" \
  jqt '.metadata.deletionTimestamp != null and .metadata.deletionGracePeriodSeconds == 30' "$out"
if wait_code "/api/v1/namespaces/$NS/pods/web" 404 10; then
  ok "pod web is gone (404) $(since "$t") after DELETE (kwok pod-delete stage)"
else
  fail "pod web still there 10 s after DELETE"
fi
t2=$(now_ms)
if wait_code "/api/v1/namespaces/$NS/services/owned-by-web" 404 15; then
  ok "Service owned-by-web garbage-collected $(since "$t2") after the pod was gone"
else
  fail "Service owned-by-web not garbage-collected within 15 s"
fi

# ---------------------------------------------------------------- PV + PVC binding
pv_name="smoke-nodes-pv-$RANDOM$RANDOM"
pv="$(jq -cn --arg n "$pv_name" '{apiVersion:"v1",kind:"PersistentVolume",metadata:{name:$n},
  spec:{capacity:{storage:"1Gi"},accessModes:["ReadWriteOnce"],storageClassName:"nfs",
        persistentVolumeReclaimPolicy:"Retain",nfs:{server:"127.0.0.1",path:"/exports/smoke"}}}')"
api "$ADMIN_TOKEN" POST /api/v1/persistentvolumes "$pv" >/dev/null
check "admin creates PersistentVolume $pv_name (nfs, storageClassName nfs) (201)" test "$(code)" = 201
pvc="$(jq -cn --arg v "$pv_name" '{apiVersion:"v1",kind:"PersistentVolumeClaim",metadata:{name:"data"},
  spec:{accessModes:["ReadWriteOnce"],storageClassName:"nfs",volumeName:$v,resources:{requests:{storage:"1Gi"}}}}')"
api "$ADMIN_TOKEN" POST "/api/v1/namespaces/$NS/persistentvolumeclaims" "$pvc" >/dev/null
check "admin creates PVC data (volumeName $pv_name, storageClassName nfs) (201)" test "$(code)" = 201
t=$(now_ms)
if wait_json "/api/v1/namespaces/$NS/persistentvolumeclaims/data" '.status.phase == "Bound"' 20; then
  ok "PVC data Bound in $(since "$t")"
else
  fail "PVC data not Bound within 20 s: $(jq -c .status <<<"$last")"
fi
check "PV $pv_name Bound to $NS/data" \
  wait_json "/api/v1/persistentvolumes/$pv_name" '.status.phase == "Bound" and .spec.claimRef.name == "data" and .spec.claimRef.namespace == "'"$NS"'"' 10

# ---------------------------------------------------------------- workloads
deploy="$(jq -cn '{apiVersion:"apps/v1",kind:"Deployment",metadata:{name:"web2"},
  spec:{replicas:2,selector:{matchLabels:{app:"web2"}},
        template:{metadata:{labels:{app:"web2"}},spec:{containers:[{name:"main",image:"registry.example/web:1"}]}}}}')"
api "$ADMIN_TOKEN" POST "/apis/apps/v1/namespaces/$NS/deployments" "$deploy" >/dev/null
t=$(now_ms)
if wait_json "/apis/apps/v1/namespaces/$NS/deployments/web2" '.status.readyReplicas == 2 and .status.availableReplicas == 2' 20; then
  ok "Deployment web2 has 2 ready replicas in $(since "$t")"
else
  fail "Deployment web2 not 2/2 ready within 20 s: $(jq -c .status <<<"$last")"
fi
job="$(jq -cn '{apiVersion:"batch/v1",kind:"Job",metadata:{name:"once"},
  spec:{backoffLimit:0,template:{spec:{restartPolicy:"Never",containers:[{name:"main",image:"registry.example/job:1"}]}}}}')"
api "$ADMIN_TOKEN" POST "/apis/batch/v1/namespaces/$NS/jobs" "$job" >/dev/null
t=$(now_ms)
if wait_json "/apis/batch/v1/namespaces/$NS/jobs/once" 'any(.status.conditions[]?; .type == "Complete" and .status == "True")' 20; then
  ok "Job once Complete in $(since "$t") (kwok pod-complete stage)"
else
  fail "Job once not Complete within 20 s: $(jq -c .status <<<"$last")"
fi

# ---------------------------------------------------------------- namespace deletion
t=$(now_ms)
api "$ADMIN_TOKEN" DELETE "/api/v1/namespaces/$NS" >/dev/null
check "DELETE namespace $NS (200)" test "$(code)" = 200
if wait_code "/api/v1/namespaces/$NS" 404 30; then
  ok "namespace $NS fully deleted in $(since "$t") (namespace controller + GC + kwok)"
else
  fail "namespace $NS still there 30 s after DELETE: $(api "$ADMIN_TOKEN" GET "/api/v1/namespaces/$NS" | jq -c .status)"
fi
api "$ADMIN_TOKEN" DELETE "/api/v1/persistentvolumes/$pv_name" >/dev/null
check "PV $pv_name deleted (pv-protection released it)" wait_code "/api/v1/persistentvolumes/$pv_name" 404 15

echo
if [ "$skipped" = 0 ]; then
  echo "smoke-nodes: $passed passed, $failed failed"
else
  echo "smoke-nodes: $passed passed, $failed failed, $skipped skipped"
fi
[ "$failed" = 0 ]
