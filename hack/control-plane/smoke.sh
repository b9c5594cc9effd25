#!/usr/bin/env bash
# Smoke-test a control plane started by up.sh, with curl and jq only.
#
# usage: smoke.sh STATE_DIR
#
# Checks: namespace, Pod create/read as admin (and that a Pod is refused
# while the namespace has no `default` ServiceAccount, even with
# automountServiceAccountToken: false), alice/bob authenticated but forbidden
# by RBAC, alice allowed after a RoleBinding, CRD + custom object, dry-run
# create, and a MutatingWebhookConfiguration pointing at nothing with
# failurePolicy: Fail ("failed calling webhook"). Prints "N passed, N failed".
set -euo pipefail

[ $# -eq 1 ] || { sed -n '2,12p' "$0" >&2; exit 2; }
# shellcheck disable=SC1091
. "$1/env"
command -v jq >/dev/null || { echo "jq is required" >&2; exit 2; }

passed=0 failed=0
ok()   { passed=$((passed + 1)); printf 'ok   - %s\n' "$*"; }
fail() { failed=$((failed + 1)); printf 'FAIL - %s\n' "$*"; }
check() {   # DESCRIPTION COMMAND...
  local d="$1"; shift
  if "$@"; then ok "$d"; else fail "$d"; fi
}

# api TOKEN METHOD PATH [BODY] -> body on stdout, HTTP code in $code_file
code_file="$(mktemp)"; trap 'rm -f "$code_file"' EXIT
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
# code_and_text HTTP_CODE FIXED_STRING BODY: last call returned HTTP_CODE and
# BODY contains FIXED_STRING.
code_and_text() { [ "$(code)" = "$1" ] && grep -qF -- "$2" <<<"$3"; }
code_and_json() { [ "$(code)" = "$1" ] && jqt "$2" "$3"; }   # HTTP_CODE FILTER BODY
code_in() { local c x; c="$(code)"; for x in "$@"; do [ "$c" = "$x" ] && return 0; done; return 1; }

NS="smoke-$(date +%s)-$RANDOM"
pod_json() {   # NAME [EXTRA_SPEC_JSON]
  jq -cn --arg n "$1" --argjson extra "${2:-{\}}" \
    '{apiVersion:"v1",kind:"Pod",metadata:{name:$n},
      spec:({containers:[{name:"main",image:"registry.example/busybox:1",command:["sleep","3600"]}]} + $extra)}'
}

# ---------------------------------------------------------------- namespace
api "$ADMIN_TOKEN" POST /api/v1/namespaces "{\"metadata\":{\"name\":\"$NS\"}}" >/dev/null
check "admin creates namespace $NS (201)" test "$(code)" = 201

# ---------------------------------------------------------------- ServiceAccount admission
out="$(api "$ADMIN_TOKEN" POST "/api/v1/namespaces/$NS/pods" "$(pod_json nosa)")"
check "pod refused without a default ServiceAccount (403 'error looking up service account')" \
  code_and_text 403 'error looking up service account' "$out"
out="$(api "$ADMIN_TOKEN" POST "/api/v1/namespaces/$NS/pods" "$(pod_json nosa2 '{"automountServiceAccountToken":false}')")"
check "automountServiceAccountToken:false does not help (still 403)" \
  code_and_text 403 'error looking up service account' "$out"

api "$ADMIN_TOKEN" POST "/api/v1/namespaces/$NS/serviceaccounts" '{"metadata":{"name":"default"}}' >/dev/null
check "admin creates ServiceAccount default (201)" test "$(code)" = 201

# ---------------------------------------------------------------- Pod as admin
api "$ADMIN_TOKEN" POST "/api/v1/namespaces/$NS/pods" "$(pod_json p1)" >/dev/null
check "admin creates pod p1 (201)" test "$(code)" = 201
out="$(api "$ADMIN_TOKEN" GET "/api/v1/namespaces/$NS/pods/p1")"
check "pod p1 reads back: container main, phase Pending, no nodeName, kube-api-access volume" \
  jqt '.spec.containers[0].name == "main" and .status.phase == "Pending"
       and (.spec.nodeName // "") == "" and .spec.serviceAccountName == "default"
       and any(.spec.volumes[]; .name | startswith("kube-api-access-"))' "$out"

# ---------------------------------------------------------------- users + RBAC
out="$(api "$ALICE_TOKEN" POST /apis/authentication.k8s.io/v1/selfsubjectreviews \
        '{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}')"
check "alice is authenticated as alice with groups team-a, system:authenticated" \
  jqt '.status.userInfo.username == "alice" and (.status.userInfo.groups | index("team-a"))
       and (.status.userInfo.groups | index("system:authenticated"))' "$out"
out="$(api "$BOB_TOKEN" POST /apis/authentication.k8s.io/v1/selfsubjectreviews \
        '{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}')"
check "bob is authenticated as bob with group team-b" \
  jqt '.status.userInfo.username == "bob" and (.status.userInfo.groups | index("team-b"))' "$out"
api "not-a-token" GET /api/v1/namespaces >/dev/null
check "an unknown token is rejected (401)" test "$(code)" = 401

out="$(api "$ALICE_TOKEN" POST "/api/v1/namespaces/$NS/pods" "$(pod_json alice1)")"
check "alice may not create pods by default (403, User \"alice\" cannot create)" \
  code_and_text 403 'User \"alice\" cannot create resource \"pods\"' "$out"
api "$BOB_TOKEN" GET "/api/v1/namespaces/$NS/pods" >/dev/null
check "bob may not list pods by default (403)" test "$(code)" = 403

# Not ClusterRole edit: without kube-controller-manager the aggregated
# ClusterRoles (admin/edit/view) have no rules (the clusterrole-aggregation
# controller fills them in), so bind an explicit Role.
api "$ADMIN_TOKEN" POST "/apis/rbac.authorization.k8s.io/v1/namespaces/$NS/roles" \
  '{"metadata":{"name":"pod-writer"},"rules":[{"apiGroups":[""],"resources":["pods"],"verbs":["get","list","watch","create","delete"]}]}' >/dev/null
check "admin creates Role pod-writer in $NS (201)" test "$(code)" = 201
api "$ADMIN_TOKEN" POST "/apis/rbac.authorization.k8s.io/v1/namespaces/$NS/rolebindings" \
  '{"metadata":{"name":"team-a-pod-writer"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"pod-writer"},
    "subjects":[{"apiGroup":"rbac.authorization.k8s.io","kind":"Group","name":"team-a"}]}' >/dev/null
check "admin binds it to group team-a (201)" test "$(code)" = 201
out="$(api "$ADMIN_TOKEN" GET /apis/rbac.authorization.k8s.io/v1/clusterroles/edit)"
check "ClusterRole edit exists but has no rules (no aggregation controller)" jqt '(.rules // []) | length == 0' "$out"
c=""
for _ in $(seq 1 50); do   # RBAC is cached briefly; <= 5 s
  api "$ALICE_TOKEN" POST "/api/v1/namespaces/$NS/pods" "$(pod_json alice1)" >/dev/null
  c="$(code)"; [ "$c" = 201 ] && break; sleep 0.1
done
check "alice creates a pod after the RoleBinding (201, got $c)" test "$c" = 201
api "$BOB_TOKEN" POST "/api/v1/namespaces/$NS/pods" "$(pod_json bob1)" >/dev/null
check "bob (team-b) still may not (403)" test "$(code)" = 403

# ---------------------------------------------------------------- CRD + custom object
crd='{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
  "metadata":{"name":"widgets.smoke.outfit.test"},
  "spec":{"group":"smoke.outfit.test","scope":"Namespaced",
    "names":{"plural":"widgets","singular":"widget","kind":"Widget"},
    "versions":[{"name":"v1","served":true,"storage":true,
      "schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object",
        "properties":{"size":{"type":"integer"}}}}}}}]}}'
api "$ADMIN_TOKEN" POST /apis/apiextensions.k8s.io/v1/customresourcedefinitions "$crd" >/dev/null
c="$(code)"
check "admin creates CRD widgets.smoke.outfit.test (201, or 409 on a re-run: got $c)" \
  code_in 201 409
est=0
for _ in $(seq 1 100); do   # <= 10 s
  if api "$ADMIN_TOKEN" GET /apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.smoke.outfit.test \
     | jq -e 'any(.status.conditions[]?; .type == "Established" and .status == "True")' >/dev/null; then
    est=1; break
  fi
  sleep 0.1
done
check "CRD becomes Established" test "$est" = 1
c=""
for _ in $(seq 1 50); do   # the new resource's REST handler appears shortly after Established
  api "$ADMIN_TOKEN" POST "/apis/smoke.outfit.test/v1/namespaces/$NS/widgets" \
    '{"apiVersion":"smoke.outfit.test/v1","kind":"Widget","metadata":{"name":"w1"},"spec":{"size":3}}' >/dev/null
  c="$(code)"; [ "$c" = 201 ] && break; sleep 0.1
done
check "admin creates custom object Widget w1 (201, got $c)" test "$c" = 201
out="$(api "$ADMIN_TOKEN" GET "/apis/smoke.outfit.test/v1/namespaces/$NS/widgets/w1")"
check "Widget w1 reads back with spec.size == 3" jqt '.spec.size == 3' "$out"

# ---------------------------------------------------------------- dry run
out="$(api "$ADMIN_TOKEN" POST "/api/v1/namespaces/$NS/pods?dryRun=All" "$(pod_json dry1)")"
check "dry-run pod create returns 201 with the defaulted object" \
  code_and_json 201 '.metadata.name == "dry1" and .status.phase == "Pending"' "$out"
api "$ADMIN_TOKEN" GET "/api/v1/namespaces/$NS/pods/dry1" >/dev/null
check "dry-run pod was not persisted (404)" test "$(code)" = 404

# ---------------------------------------------------------------- webhook pointing at nothing
# A free loopback port where nothing listens.
hook_port=""
for _ in $(seq 1 200); do
  p=$(( 20000 + (RANDOM * 32768 + RANDOM) % 12000 ))
  if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then hook_port=$p; break; fi
done
mwc="$(jq -cn --arg url "https://127.0.0.1:$hook_port/mutate" --arg ns "$NS" '{
  apiVersion:"admissionregistration.k8s.io/v1",kind:"MutatingWebhookConfiguration",
  metadata:{name:"smoke-dead-webhook"},
  webhooks:[{name:"pods.smoke.outfit.test",admissionReviewVersions:["v1"],sideEffects:"None",
    failurePolicy:"Fail",timeoutSeconds:5,clientConfig:{url:$url},
    rules:[{operations:["CREATE"],apiGroups:[""],apiVersions:["v1"],resources:["pods"]}],
    namespaceSelector:{matchLabels:{"kubernetes.io/metadata.name":$ns}}}]}')"
api "$ADMIN_TOKEN" POST /apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations "$mwc" >/dev/null
check "admin registers MutatingWebhookConfiguration -> https://127.0.0.1:$hook_port/mutate (201)" test "$(code)" = 201
hit="" i=0
for i in $(seq 1 100); do   # the configuration reaches the admission plugin within ~1 s; <= 10 s
  out="$(api "$ADMIN_TOKEN" POST "/api/v1/namespaces/$NS/pods?dryRun=All" "$(pod_json hooked)")"
  if grep -q 'failed calling webhook' <<<"$out"; then hit="$out"; break; fi
  sleep 0.1
done
check "pod create (dry-run probe) fails with 'failed calling webhook' (after $i tries)" test -n "$hit"
out="$(api "$ADMIN_TOKEN" POST "/api/v1/namespaces/$NS/pods" "$(pod_json hooked)")"
check "real pod create fails too: HTTP $(code): $(jq -r .message <<<"$out" | cut -c1-160)" \
  code_and_text 500 'failed calling webhook \"pods.smoke.outfit.test\"' "$out"
api "$ADMIN_TOKEN" DELETE /apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/smoke-dead-webhook >/dev/null
check "admin deletes the MutatingWebhookConfiguration (200)" test "$(code)" = 200
c=""
for _ in $(seq 1 100); do   # <= 10 s
  api "$ADMIN_TOKEN" POST "/api/v1/namespaces/$NS/pods" "$(pod_json after-hook)" >/dev/null
  c="$(code)"; [ "$c" = 201 ] && break; sleep 0.1
done
check "pod create works again after the deletion (201, got $c)" test "$c" = 201

echo
echo "smoke: $passed passed, $failed failed"
[ "$failed" = 0 ]
