#!/usr/bin/env bash
# The workspace proxy beside its peers (issue 42; BENCHMARKS.md, "Workspace proxy"): one app
# (nginx serving a small and a 1 MiB file) on a workspace pod's address, reached directly, through
# outfit's proxy (`proxyDomain`), through nginx as a reverse proxy, and through JupyterHub's
# configurable-http-proxy (its npm package), each loaded by wrk at 1, 64 and 1,000 connections:
# requests/s and p50/p99 latency for the small file, MB/s for the large one; WebSocket round trips
# (an echo on the pod's port 8080) at 1 and 64 connections; outfit's RSS, and
# configurable-http-proxy's with one route and with 10,000; and the time from the pod turning
# Ready (a stop and a start) to its route answering, five times. hack/bench-proxy.py has the
# WebSocket echo and client, the route loader and the Ready-to-route clock.
#
#   hack/bench-proxy.sh [--smoke] [SECONDS per run, default 10]
#
# The cluster is the project's own (hack/control-plane/up.sh --nodes 1; kwok's pod gets an
# address from the pod network, which this script adds to the loopback device, as the tests do:
# root only). The workspace is shared publicly, so no sign-in is in the path (a pass costs one
# AES-GCM open per request besides). Installs what it uses when missing: nginx-light and wrk
# (Debian), configurable-http-proxy (npm, into ~/.cache/outfit/chp).
#
# --smoke: one-second runs at 1 and 4 connections, 100 routes, one Ready-to-route trial, on a
# debug build, to show the script still runs (hack/lib/bins.sh); its figures mean nothing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. hack/lib/bins.sh
take_smoke "$@"
[ "$SMOKE" = 1 ] && shift
seconds="${1:-10}"
connections=(1 64 1000)
ws_connections=(1 64)
routes=10000
trials=5
if [ "$SMOKE" = 1 ]; then
  seconds=1
  connections=(1 4)
  ws_connections=(1 4)
  routes=100
  trials=1
fi
ulimit -n "$(ulimit -Hn)" # 1,000 connections in, as many out, for each proxy
log() { echo "[bench-proxy $(date -u +%T)] $*" >&2; }

# The peers and the load generator.
missing=()
command -v nginx >/dev/null || missing+=(nginx-light)
command -v wrk >/dev/null || missing+=(wrk)
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
chp_dir="${OUTFIT_CACHE_DIR:-$HOME/.cache/outfit}/chp-5.3.0"
if [ ! -x "$chp_dir/node_modules/.bin/configurable-http-proxy" ]; then
  log "installing configurable-http-proxy 5.3.0 (npm)"
  mkdir -p "$chp_dir"
  (cd "$chp_dir" && npm install --silent --no-audit --no-fund configurable-http-proxy@5.3.0 >/dev/null)
fi
build_bins -p outfit

work="$(mktemp -d)"
state="$work/cluster"
pids=()
alias_ip=""
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
  [ -n "$alias_ip" ] && ip addr del "$alias_ip/32" dev lo 2>/dev/null || true
  hack/control-plane/down.sh "$state" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
hack/control-plane/up.sh --nodes 1 "$state" >&2
# shellcheck disable=SC1091
. "$state/env"
kube() { # METHOD PATH [BODY]
  curl -sf --cacert "$APISERVER_CA" -H "Authorization: Bearer $ADMIN_TOKEN" -H 'Content-Type: application/json' \
    -X "$1" "$APISERVER_URL$2" ${3:+-d "$3"}
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# The Workspace resource (the native API's launches make one), established before the backend
# starts watching it.
crd_json="$(python3 -c 'import json, sys, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))' \
  crates/outfit-workspaces-core/src/resource/crd.yaml)"
kube POST /apis/apiextensions.k8s.io/v1/customresourcedefinitions "$crd_json" >/dev/null
for _ in $(seq 100); do
  kube GET /apis/apiextensions.k8s.io/v1/customresourcedefinitions/workspaces.outfit.dev |
    grep -q '"type": *"Established"' && break
  sleep 0.1
done
ns=ws-bench-proxy
kube POST /api/v1/namespaces "{\"metadata\":{\"name\":\"$ns\"}}" >/dev/null
kube POST "/api/v1/namespaces/$ns/serviceaccounts" '{"metadata":{"name":"default"}}' >/dev/null || true # the controller manager may have made it

# The catalogue's manifest, served over HTTP as the whitelist wants.
mkdir -p "$work/manifests"
cat >"$work/manifests/web.yaml" <<'EOF'
apiVersion: v1
kind: Pod
metadata:
  name: web
  annotations: {sciencedata.dk/ingress-port: "80"}
spec:
  containers:
  - name: web
    image: nginx
    ports: [{containerPort: 80}, {containerPort: 8080}]
EOF
manifest_port="$(free_port)"
python3 -m http.server "$manifest_port" --bind 127.0.0.1 --directory "$work" >/dev/null 2>&1 &
pids+=($!)

# outfit workspaces with the proxy (sign-in is configured, as the proxy needs, but never used:
# the provider is found only at a sign-in).
port="$(free_port)"
echo "not used" >"$work/client-secret"
cat >"$work/config.yaml" <<EOF
namespace: $ns
listen: 127.0.0.1:$port
adminListen: ""
podSubnetCidr: $POD_CIDR
whitelistManifestRegex: 'http://127\.0\.0\.1:$manifest_port/manifests/'
trustedProxyCidrs: [127.0.0.1/32]
networkPolicy: false
proxyDomain: ws.bench
maxConnections: 4096
maxStreams: 2048
maxStreamsPerUser: 2048
maxStreamsPerSource: 2048
catalogue: [{name: web, url: 'http://127.0.0.1:$manifest_port/manifests/web.yaml'}]
oidc: {issuerUrl: 'http://127.0.0.1:9/', clientId: bench, clientSecretFile: '$work/client-secret', redirectUrl: 'http://127.0.0.1:$port/auth/callback'}
EOF
"$BIN_DIR/outfit" workspaces --config "$work/config.yaml" >"$work/outfit.log" 2>&1 &
outfit_pid=$!
pids+=("$outfit_pid")
api() { curl -sf -H 'X-Forwarded-User: alice' -H 'Content-Type: application/json' -X "$1" "http://127.0.0.1:$port/api/v1/$2" ${3:+-d "$3"}; }
for _ in $(seq 100); do api GET me >/dev/null 2>&1 && break; sleep 0.2; done
launched="$(curl -s -H 'X-Forwarded-User: alice' -H 'Content-Type: application/json' \
  -d '{"manifest": "web"}' "http://127.0.0.1:$port/api/v1/workspaces")"
name="$(python3 -c 'import json,sys; print(json.loads(sys.argv[1]).get("name", ""))' "$launched" 2>/dev/null || true)"
[ -n "$name" ] || { cat "$work/outfit.log" >&2; echo "the launch failed: $launched" >&2; exit 1; }
for _ in $(seq 150); do
  status="$(api GET "workspaces/$name" | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"])')"
  [ "$status" = ready ] && break
  sleep 0.2
done
[ "$status" = ready ] || { cat "$work/outfit.log" >&2; echo "the workspace did not turn ready ($status)" >&2; exit 1; }
api PUT "workspaces/$name/sharing" '{"level": "public"}' >/dev/null
alias_ip="$(kube GET "/api/v1/namespaces/$ns/pods/$name" | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"]["podIP"])')"
ip addr add "$alias_ip/32" dev lo
host="$name.ws.bench"
ws_host="8080-$name.ws.bench"
python3 hack/bench-proxy.py echo "$alias_ip" 8080 &
pids+=($!)

# The app, and nginx as a proxy beside it; configurable-http-proxy.
head -c 100 /dev/zero | tr '\0' 'x' >"$work/small"
head -c 1048576 /dev/urandom >"$work/large"
chmod 755 "$work" && chmod 644 "$work/small" "$work/large" # nginx's workers read them
nginx_port="$(free_port)"
nginx_ws_port="$(free_port)"
cat >"$work/nginx.conf" <<EOF
worker_processes 1;
pid $work/nginx.pid;
error_log $work/nginx-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  upstream app { server $alias_ip:80; keepalive 1024; }
  server { listen $alias_ip:80; root $work; }
  server {
    listen 127.0.0.1:$nginx_port;
    location / { proxy_pass http://app; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
  server {
    listen 127.0.0.1:$nginx_ws_port;
    location / {
      proxy_pass http://$alias_ip:8080; proxy_http_version 1.1;
      proxy_set_header Upgrade \$http_upgrade; proxy_set_header Connection upgrade;
    }
  }
}
EOF
nginx -c "$work/nginx.conf" -p "$work"
chp() { # PORT API-PORT TARGET
  "$chp_dir/node_modules/.bin/configurable-http-proxy" --ip 127.0.0.1 --port "$1" \
    --api-ip 127.0.0.1 --api-port "$2" --default-target "$3" --log-level error &
  pids+=($!)
}
chp_port="$(free_port)"
chp_api_port="$(free_port)"
chp "$chp_port" "$chp_api_port" "http://$alias_ip:80"
chp_pid=$!
chp_ws_port="$(free_port)"
chp "$chp_ws_port" "$(free_port)" "http://$alias_ip:8080"
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$chp_port/small" >/dev/null && break; sleep 0.2; done
proxied="$(curl -s -o /dev/null -w '%{http_code}' -H "Host: $host" "http://127.0.0.1:$port/small")"
[ "$proxied" = 200 ] || {
  cat "$work/outfit.log" >&2
  curl -si -H "Host: $host" "http://127.0.0.1:$port/small" >&2 || true
  echo "outfit's proxy answers $proxied" >&2
  exit 1
}

# wrk's summary of one run: requests/s, p50 and p99 (ms), transfer (MB/s).
run() { # NAME URL HOST CONNECTIONS FILE
  local out
  out="$(wrk -t1 -c"$4" -d"${seconds}s" --latency -H "Host: $3" "$2/$5")"
  python3 - "$1" "$4" "$5" "$out" <<'PY'
import re, sys
name, conns, file, out = sys.argv[1:]
def ms(label):
    m = re.search(rf"^\s*{label}%\s+([\d.]+)(us|ms|s)\b", out, re.M)
    if not m: return float("nan")
    v, unit = float(m.group(1)), m.group(2)
    return v / 1000 if unit == "us" else v * 1000 if unit == "s" else v
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
m = re.search(r"Transfer/sec:\s+([\d.]+)(\w+)", out)
mb = float(m.group(1)) * {"B": 1e-6, "KB": 1e-3, "MB": 1, "GB": 1e3}[m.group(2)]
errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
bad = f" ({errors.group(1)} errors)" if errors else ""
print(f"| {name} | {file} | {conns} | {rps:,.0f}{bad} | {ms('50'):.2f} | {ms('99'):.2f} | {mb:,.1f} |")
if errors or rps == 0:
    sys.exit(f"{name}: {errors.group(1) if errors else 'no'} answers were errors; a measurement of errors means nothing")
PY
}
echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); nproc: $(nproc); load average: $(cat /proc/loadavg); ${seconds}s per run"
echo "| path | file | connections | requests/s | p50 ms | p99 ms | MB/s |"
echo "|---|---|---:|---:|---:|---:|---:|"
for conns in "${connections[@]}"; do
  run direct "http://$alias_ip:80" "$alias_ip" "$conns" small
  run outfit "http://127.0.0.1:$port" "$host" "$conns" small
  run nginx "http://127.0.0.1:$nginx_port" "$alias_ip" "$conns" small
  run configurable-http-proxy "http://127.0.0.1:$chp_port" "$alias_ip" "$conns" small
done
for path in "direct http://$alias_ip:80 $alias_ip" "outfit http://127.0.0.1:$port $host" \
  "nginx http://127.0.0.1:$nginx_port $alias_ip" "configurable-http-proxy http://127.0.0.1:$chp_port $alias_ip"; do
  # shellcheck disable=SC2086
  run $path "${connections[1]}" large
done
for conns in "${ws_connections[@]}"; do
  for path in "direct http://$alias_ip:8080 $alias_ip" "outfit http://127.0.0.1:$port $ws_host" \
    "nginx http://127.0.0.1:$nginx_ws_port $alias_ip" "configurable-http-proxy http://127.0.0.1:$chp_ws_port $alias_ip"; do
    # shellcheck disable=SC2086
    python3 hack/bench-proxy.py rtt $path "$conns" "$seconds"
  done
done
rss() { awk '/VmRSS/ {print $2, $3}' "/proc/$1/status"; }
echo "outfit workspaces RSS: $(rss "$outfit_pid") (one workspace)"
echo "configurable-http-proxy RSS: $(rss "$chp_pid") (one route)"
python3 hack/bench-proxy.py routes "http://127.0.0.1:$chp_api_port" "$routes"
echo "configurable-http-proxy RSS: $(rss "$chp_pid") ($routes routes more)"

# From Ready to the route: the workspace stopped and started again (same name, so same host),
# the pod's Ready seen through a watch beside the proxy polled every millisecond.
for trial in $(seq "$trials"); do
  api POST "workspaces/$name/stop" >/dev/null
  for _ in $(seq 300); do kube GET "/api/v1/namespaces/$ns/pods/$name" >/dev/null 2>&1 || break; sleep 0.1; done
  python3 hack/bench-proxy.py route-live "$APISERVER_URL" "$APISERVER_CA" "$ADMIN_TOKEN" "$ns" "$name" \
    "http://127.0.0.1:$port" "$host" 60 >"$work/route-live" &
  live_pid=$!
  sleep 1 # the watch is open before the start
  api POST "workspaces/$name/start" >/dev/null
  wait "$live_pid" || { cat "$work/outfit.log" >&2; echo "route-live failed" >&2; exit 1; }
  read -r took_ms status <"$work/route-live"
  echo "Ready to route, trial $trial: $took_ms ms (first answer $status)"
done
