#!/usr/bin/env bash
# Check the image build.sh wrote, with tools that share no code with oci.py: skopeo reads the
# archive's config, umoci unpacks it into a root file system and writes the runtime config a
# container would get. outfit then runs from that root file system as the image's user, under
# chroot (as root; otherwise the unpacked binary runs directly): --version, `mutate` on both
# examples, `serve` answering an AdmissionReview over TLS, `serve --from-cluster` reaching an API
# server named `localhost` (the static binary's resolver reading /etc/hosts, as a pod has it), and
# `workspaces` starting its cluster client, which needs the image's CA bundle.
#
# usage: hack/image/check.sh [ARCHIVE]   (default target/image/outfit.tar)
# Installs what is missing: skopeo, umoci, jq (Debian's packages). Needs python3 and curl.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
archive=$(realpath "${1:-target/image/outfit.tar}")
[ -f "$archive" ] || { echo "check.sh: no $archive; run hack/image/build.sh first" >&2; exit 2; }

missing=()
for tool in skopeo umoci jq; do command -v "$tool" >/dev/null || missing+=("$tool"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "[image] installing: ${missing[*]}" >&2
  apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null
fi

passed=0
ok() { echo "[image] ok: $*" >&2; passed=$((passed + 1)); }
fail() { echo "[image] FAIL: $*" >&2; echo "image: $passed passed, 1 failed"; exit 1; }

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# ---------------------------------------------------------------- the config, as skopeo reads it
skopeo inspect --config "oci-archive:$archive" > "$work/config.json"
jq -e '.os == "linux" and .architecture == "amd64"' "$work/config.json" >/dev/null || fail "platform is not linux/amd64"
user=$(jq -r '.config.User // ""' "$work/config.json")
# runAsNonRoot can only be verified by the kubelet for a numeric, non-zero uid.
[[ "$user" =~ ^[0-9]+(:[0-9]+)?$ && "${user%%:*}" != 0 ]] || fail "User is '$user', not a numeric non-root uid"
ok "User $user"
entrypoint=$(jq -c '.config.Entrypoint' "$work/config.json")
[ "$entrypoint" = '["/usr/local/bin/outfit"]' ] || fail "Entrypoint is $entrypoint"
jq -e '.config.Cmd == null' "$work/config.json" >/dev/null || fail "Cmd is set: the manifests pass only args"
ok "Entrypoint $entrypoint, no Cmd"
for key in title description version revision created source licenses; do
  value=$(jq -r --arg k "org.opencontainers.image.$key" '.config.Labels[$k] // ""' "$work/config.json")
  [ -n "$value" ] || fail "label org.opencontainers.image.$key missing"
done
version=$(jq -r '.config.Labels["org.opencontainers.image.version"]' "$work/config.json")
ok "org.opencontainers.image.* labels (version $version)"

# ---------------------------------------------------------------- unpacked, as a runtime would
mkdir "$work/layout"
tar -xf "$archive" -C "$work/layout"
tag=$(jq -r '.manifests[0].annotations["org.opencontainers.image.ref.name"]' "$work/layout/index.json")
[ "$tag" = "$version" ] || fail "the archive's tag is $tag, its version label $version"
rootless=()
[ "$(id -u)" = 0 ] || rootless=(--rootless)
umoci unpack "${rootless[@]}" --image "$work/layout:$tag" "$work/bundle" >/dev/null
rootfs="$work/bundle/rootfs"
runtime="$work/bundle/config.json"
jq -e --argjson uid "${user%%:*}" '.process.user.uid == $uid' "$runtime" >/dev/null || fail "runtime uid is not ${user%%:*}"
jq -e '.process.args == ["/usr/local/bin/outfit"]' "$runtime" >/dev/null || fail "runtime args: $(jq -c .process.args "$runtime")"
ok "umoci unpack: runtime config runs /usr/local/bin/outfit as uid ${user%%:*}"

binary="$rootfs/usr/local/bin/outfit"
if LC_ALL=C readelf -l "$binary" | grep -q 'Requesting program interpreter'; then fail "the binary is dynamically linked"; fi
ok "static binary ($(file -b "$binary" | grep -o 'static[-a-z]* linked' || echo 'no interpreter'))"
[ ! -e "$rootfs/bin/sh" ] || fail "the image has a shell"
grep -q "^[^:]*:x:${user%%:*}:" "$rootfs/etc/passwd" || fail "no /etc/passwd entry for uid ${user%%:*}"
certs=$(grep -c 'BEGIN CERTIFICATE' "$rootfs/etc/ssl/certs/ca-certificates.crt" || true)
[ "$certs" -gt 50 ] || fail "only $certs CA certificates"
ok "no shell, /etc/passwd names uid ${user%%:*}, $certs CA certificates"

# ---------------------------------------------------------------- outfit, run from the rootfs
# As root: chroot into the rootfs as the image's user, with the image's environment only. Else
# run the unpacked binary directly, with paths under the rootfs. `env` and `chroot` exec, so a
# background outfit's pid is $!.
mapfile -t image_env < <(jq -r '.process.env[]' "$runtime")
if [ "$(id -u)" = 0 ]; then
  launcher=("$(command -v chroot)" --userspec="$user" "$rootfs" /usr/local/bin/outfit)
  at() { printf '%s' "$1"; }
  mode="chroot as $user"
else
  launcher=("$binary")
  at() { printf '%s' "$rootfs$1"; }
  mode="unpacked binary run directly (not root: no chroot)"
fi
in_image() { env -i "${image_env[@]}" "${launcher[@]}" "$@"; }
echo "[image] running outfit: $mode" >&2
mkdir -p "$rootfs/tmp/examples" "$rootfs/tmp/run"
cp -r examples/. "$rootfs/tmp/examples/"
chmod -R a+rX "$rootfs/tmp/examples"
chown "$user" "$rootfs/tmp/run" 2>/dev/null || chmod 1777 "$rootfs/tmp/run"

[ "$(in_image --version)" = "outfit $version" ] || fail "outfit --version: $(in_image --version)"
ok "outfit --version: outfit $version"

in_image mutate --policies "$(at /tmp/examples/workspace/policies)" -f "$(at /tmp/examples/workspace/pod.yaml)" > "$work/workspace.yaml"
diff -u examples/workspace/expected.yaml "$work/workspace.yaml" >&2 || fail "mutate examples/workspace"
in_image mutate --policies "$(at /tmp/examples/gatekeeper-nfs/policies.yaml)" -f "$(at /tmp/examples/gatekeeper-nfs/pod.yaml)" > "$work/nfs.yaml"
diff -u examples/gatekeeper-nfs/expected.yaml "$work/nfs.yaml" >&2 || fail "mutate examples/gatekeeper-nfs"
ok "outfit mutate: examples/workspace and examples/gatekeeper-nfs give their expected.yaml"

# Starts `outfit serve` in the background; waits for its start line and sets webhook, admin.
start_serve() {
  local log=$1; shift
  : > "$log"
  env -i "${image_env[@]}" "${launcher[@]}" serve --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
    --log-format json "$@" > "$log" 2>&1 &
  pids+=($!)
  serve_pid=$!
  for _ in $(seq 100); do
    if line=$(grep -m 1 '"outfit serve started"' "$log"); then
      webhook=$(jq -r '.fields.webhook // .webhook' <<<"$line")
      admin=$(jq -r '.fields.admin // .admin' <<<"$line")
      return 0
    fi
    kill -0 "$serve_pid" 2>/dev/null || fail "outfit serve exited: $(cat "$log")"
    sleep 0.1
  done
  fail "outfit serve did not start in 10 s: $(cat "$log")"
}
stop_serve() {
  kill -TERM "$serve_pid"
  wait "$serve_pid" || fail "outfit serve exited with $? on SIGTERM"
}

start_serve "$work/serve.log" --policies "$(at /tmp/examples/workspace/policies)" --self-signed "$(at /tmp/run/certs)"
for _ in $(seq 50); do [ "$(curl -s "http://$admin/readyz" || true)" = ok ] && break; sleep 0.1; done
curl -sf "http://$admin/readyz" >/dev/null || fail "/readyz on $admin"
curl -sf --cacert "$rootfs/tmp/run/certs/ca.crt" --resolve "localhost:${webhook##*:}:127.0.0.1" \
  -H 'Content-Type: application/json' --data-binary @tests/fixtures/admission/pod-create-notebook.json \
  "https://localhost:${webhook##*:}/mutate?timeout=10s" > "$work/review.json" || fail "POST /mutate"
jq -e '.response.allowed == true and .response.patchType == "JSONPatch"' "$work/review.json" >/dev/null \
  || fail "AdmissionReview answer: $(cat "$work/review.json")"
stop_serve
ok "outfit serve: ready, a JSONPatch for the notebook pod over TLS, clean exit on SIGTERM"

# A stand-in API server that records what it is asked; `localhost` must resolve to reach it. The
# kubelet gives every pod an /etc/hosts like this one.
printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' > "$rootfs/etc/hosts"
python3 - "$work/api.port" "$work/api.requests" <<'EOF' &
import http.server, sys
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open(sys.argv[2], "a") as f:
            f.write(self.path + "\n")
        body = b'{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}'
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
import os; os.replace(sys.argv[1] + ".tmp", sys.argv[1])
server.serve_forever()
EOF
pids+=($!)
for _ in $(seq 50); do [ -s "$work/api.port" ] && break; sleep 0.1; done
cat > "$rootfs/tmp/run/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://localhost:$(cat "$work/api.port")"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
EOF
chmod a+r "$rootfs/tmp/run/kubeconfig"
image_env+=("KUBECONFIG=$(at /tmp/run/kubeconfig)")
start_serve "$work/cluster.log" --from-cluster --self-signed "$(at /tmp/run/certs)"
for _ in $(seq 100); do [ -s "$work/api.requests" ] && break; sleep 0.1; done
[ -s "$work/api.requests" ] || fail "outfit serve --from-cluster never reached http://localhost: $(cat "$work/cluster.log")"
stop_serve
ok "outfit serve --from-cluster resolved localhost and asked for $(head -n 1 "$work/api.requests")"

# kube's TLS setup loads the system's CA roots even for a cluster it reaches over http or with
# its own CA; without the image's bundle, `outfit workspaces` would not start at all.
: > "$work/api.requests"
env -i "${image_env[@]}" "${launcher[@]}" workspaces --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
  > "$work/workspaces.log" 2>&1 &
pids+=($!)
serve_pid=$!
for _ in $(seq 100); do [ -s "$work/api.requests" ] && break; sleep 0.1; done
[ -s "$work/api.requests" ] || fail "outfit workspaces never reached the API server: $(cat "$work/workspaces.log")"
! grep -q 'CA certificates' "$work/workspaces.log" || fail "outfit workspaces: $(grep 'CA certificates' "$work/workspaces.log")"
stop_serve
ok "outfit workspaces loaded the CA bundle and asked for $(head -n 1 "$work/api.requests")"

echo "image: $passed passed, 0 failed"
