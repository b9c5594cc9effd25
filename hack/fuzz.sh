#!/usr/bin/env bash
# Coverage-guided fuzzing of outfit (cargo-fuzz, libFuzzer): targets in fuzz/fuzz_targets/, their
# invariants and the long-run figures in RELIABILITY.md. Builds in fuzz/target, never in the main
# target dir.
#
#   hack/fuzz.sh --ci [SECONDS]         install nightly and cargo-fuzz if missing, build, run every
#                                       target SECONDS (default 30) from its checked-in corpus;
#                                       exit 1 and print the reproducer if any target fails
#   hack/fuzz.sh run TARGET [SECONDS] [libFuzzer args...]
#                                       fuzz TARGET (default 60 s), new inputs kept in
#                                       fuzz/target/work/TARGET; crashes in fuzz/artifacts/TARGET
#   hack/fuzz.sh repro TARGET FILE...   run TARGET on the given inputs once (a crash's backtrace)
#   hack/fuzz.sh seed                   (re)write the seeds taken from the repository's fixtures,
#                                       examples and docs into fuzz/corpus/* (needs python3, PyYAML);
#                                       then cmin
#   hack/fuzz.sh cmin [TARGET...]       minimise fuzz/corpus/TARGET with what the runs found added
#   hack/fuzz.sh build                  build every target
#   hack/fuzz.sh tools                  install nightly and cargo-fuzz if missing (hack/prepare.sh)
#
# Targets: admission, location, policies, workspace_request.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

TARGETS=(admission location policies workspace_request)
# -O: optimised, with debug assertions and overflow checks (cargo-fuzz's -a), so an overflow is a
# crash; AddressSanitizer (cargo-fuzz's default) guards the dependencies' unsafe code.
BUILD_FLAGS=(-O -a --codegen-units 16)
# A single input taking 10 s is a finding (a quadratic blow-up), not something to wait for.
RUN_FLAGS=(-timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -dict="$root/fuzz/dicts/kubernetes.dict")

die() { echo "fuzz.sh: $*" >&2; exit 2; }

ensure_tools() {
  if ! rustup toolchain list | grep -q '^nightly'; then
    echo "installing the nightly toolchain (libFuzzer's instrumentation needs it)"
    rustup toolchain install nightly --profile minimal --no-self-update
  fi
  if ! command -v cargo-fuzz >/dev/null; then
    echo "installing cargo-fuzz"
    # A debug build: it only runs cargo and the fuzzers, and builds in 24 CPU-s instead of 43.
    cargo install cargo-fuzz --locked --debug
  fi
}

build() {
  (cd fuzz && cargo +nightly fuzz build "${BUILD_FLAGS[@]}" "$@")
}

# run_target TARGET SECONDS WORKDIR [libFuzzer args]: fuzz from WORKDIR (written) and the checked-in
# corpus (read only). Prints the reproducer and returns 1 when the target fails.
run_target() {
  local target=$1 seconds=$2 work=$3
  shift 3
  mkdir -p "$work" "fuzz/corpus/$target" "fuzz/artifacts/$target"
  local marker scratch
  marker=$(mktemp)
  # The targets' own files (the config target writes one per process), removed with the run.
  scratch=$(mktemp -d)
  local status=0
  (cd fuzz && TMPDIR="$scratch" cargo +nightly fuzz run "${BUILD_FLAGS[@]}" "$target" "$work" "corpus/$target" -- \
    "${RUN_FLAGS[@]}" -max_total_time="$seconds" "$@") || status=$?
  rm -rf "$scratch"
  if [ "$status" -ne 0 ]; then
    echo "FUZZ FAILURE: target $target exited with status $status" >&2
    local found=0
    while IFS= read -r file; do
      found=1
      echo "reproducer: $root/$file" >&2
      echo "  replay: hack/fuzz.sh repro $target $root/$file" >&2
    done < <(find "fuzz/artifacts/$target" -type f -newer "$marker" | sort)
    [ "$found" -eq 1 ] || echo "(no reproducer written: see the output above)" >&2
    rm -f "$marker"
    return 1
  fi
  rm -f "$marker"
}

seed() {
  command -v python3 >/dev/null || die "seed needs python3 (with PyYAML)"
  python3 - "$root" <<'PY'
import glob, hashlib, json, os, re, sys
import yaml

root = sys.argv[1]
os.chdir(root)
out = {}

def add(target, data):
    if isinstance(data, str):
        data = data.encode()
    out.setdefault(target, set()).add(data)

def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()

def compact(value):
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)

def yaml_docs(text):
    return [d for d in yaml.safe_load_all(text) if d is not None]

def doc_blocks(path, lang="yaml"):
    return re.findall(r"```" + lang + r"\n(.*?)```", read(path), re.S)

# admission: the review fixtures as they are, and every fixture and example object wrapped in a
# review (CREATE, and UPDATE for what Gatekeeper mutates).
for path in sorted(glob.glob("tests/fixtures/admission/*.json")):
    add("admission", compact(json.loads(read(path))))
objects = []
for pattern in ["tests/fixtures/*/input.yaml", "tests/fixtures/*/expected.yaml", "examples/*/pod.yaml",
                "examples/*/expected.yaml"]:
    for path in sorted(glob.glob(pattern)):
        try:
            objects += [d for d in yaml_docs(read(path)) if isinstance(d, dict)]
        except yaml.YAMLError:
            pass  # invalid-input is invalid on purpose
for path in sorted(glob.glob("tests/fixtures/admission/expected/*.json")):
    objects.append(json.loads(read(path)))
for index, obj in enumerate(objects):
    namespace = (obj.get("metadata") or {}).get("namespace") or "default"
    for operation in ["CREATE", "UPDATE"]:
        review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": f"fuzz-{index}-{operation.lower()}",
            "kind": {"group": "", "version": "v1", "kind": obj.get("kind", "")},
            "namespace": namespace, "operation": operation,
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": obj}}
        add("admission", compact(review))

# policies: every policy file, as YAML and as JSON (one object per line); the docs' policy examples.
policy_files = sorted(glob.glob("tests/fixtures/*/policies.yaml") + glob.glob("tests/fixtures/*/policies/*.yaml")
                      + glob.glob("examples/*/policies.yaml") + glob.glob("examples/*/policies/*.yaml"))
locations = set()
for path in policy_files:
    text = read(path)
    add("policies", text)
    docs = yaml_docs(text)
    add("policies", "".join(compact(d) + "\n" for d in docs))
    for doc in docs:
        add("policies", yaml.safe_dump(doc, sort_keys=False))
        spec = doc.get("spec") or {}
        if "location" in spec:
            locations.add(spec["location"])
        for test in (spec.get("parameters") or {}).get("pathTests") or []:
            if "subPath" in test:
                locations.add(test["subPath"])
for path in sorted(glob.glob("docs/*.md")):
    for block in doc_blocks(path):
        if any(kind in block for kind in ["PodDefault", "mutations.gatekeeper.sh", "outfit.dev/v1alpha1",
                                          "existing-shares", "filers-list"]):
            add("policies", block)
            for match in re.findall(r"location:\s*(.+)", block):
                locations.add(match.strip().strip("'\""))

# location: what policies hold, and the parser tests' strings.
for text in re.findall(r'r#"(.*?)"#|"((?:[^"\\]|\\.)*)"', read("crates/outfit-core/src/gatekeeper/location/tests.rs")):
    raw = text[0] or bytes(text[1], "utf-8").decode("unicode_escape")
    if len(raw) < 200:
        locations.add(raw)
for location in locations:
    add("location", location)

# workspace_request: a mode byte (see fuzz/fuzz_targets/workspace_request.rs), then the input.
def ws(mode, data):
    if isinstance(data, str):
        data = data.encode()
    add("workspace_request", bytes([mode]) + data)

# The workspace backend's docs: the index and its pages, one per reader.
workspace_docs = ["docs/workspaces.md"] + sorted(glob.glob("docs/workspaces/*.md"))
workspace_blocks = [block for path in workspace_docs for block in doc_blocks(path)]
for block in workspace_blocks:
    if "apiVersion" not in block and not block.lstrip().startswith(("metadata:", "spec:")):
        ws(0, block)
ws(0, "namespace: sciencedata\nmaxCpuPerUser: 4\nmaxMemoryPerUser: 8Gi\nidleTimeout: 2h\nmaxLifetime: 24h\n")
ws(0, "")
manifests = []
for path in ["crates/outfit-workspaces-core/src/workspace/manifest/tests.rs", "tests/integration/workspaces/support.rs",
             "tests/integration/workspaces/guards.rs"]:
    manifests += [m for m in re.findall(r'r#"(.*?)"#', read(path), re.S) if "kind: Pod" in m]
for block in workspace_blocks:
    if "kind: Pod" in block:
        manifests.append(block)
for manifest in manifests:
    ws(2, manifest)
for body in [{"manifest": "jupyter"},
             {"manifest": "jupyter", "settings": {"jupyter": {"FILE": "a.ipynb", "SD_UID": "mallory"}}},
             {"manifest": "jupyter", "settings": {"nosuch": {"A": "b"}, "helper": {"X": "y"}}}]:
    ws(1, compact(body))
pods = [o for o in objects if o.get("kind") == "Pod"]
started = {"outfit.dev/user-id": "alice@dtu.dk", "outfit.dev/create-deadline": "2027-01-15T08:00:00Z",
           "outfit.dev/started": "2027-01-15T07:59:00Z", "outfit.dev/last-activity": "2027-01-15T09:00:00Z",
           "outfit.dev/idle-timeout": "2h", "outfit.dev/max-lifetime": "24h",
           "outfit.dev/activity-url": "http://{ip}:8888/api/status",
           "outfit.dev/tokens": '{"jupyter":"abc"}', "outfit.dev/ssh-port": "30022",
           "sciencedata.dk/ingress-port": "8888", "sciencedata.dk/copy-token": "appendURL"}
failed = dict(started, **{"outfit.dev/failed": "readiness: the pod did not turn Ready"})
status = {"phase": "Running", "podIP": "10.128.0.5", "hostIP": "10.0.0.5", "startTime": "2027-01-15T07:58:00Z",
          "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}],
          "containerStatuses": [{"name": "jupyter", "ready": True, "restartCount": 0, "image": "j", "imageID": "",
                                 "state": {"running": {"startedAt": "2027-01-15T07:58:30Z"}}}]}
for pod in pods[:4]:
    ws(3, compact(pod))
for annotations in [started, failed]:
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "jupyter-alice-dtu-dk", "annotations": annotations,
                        "labels": {"user": "alice", "domain": "dtu.dk", "podName": "jupyter-alice-dtu-dk"}},
           "spec": {"containers": [{"name": "jupyter", "image": "j",
                                    "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}},
                                    "volumeMounts": [{"name": "sciencedata", "mountPath": "/w"}]}],
                    "volumes": [{"name": "sciencedata", "persistentVolumeClaim": {"claimName": "user-storage-alice-dtu-dk"}}]},
           "status": status}
    ws(3, compact(pod))
    claim = {"metadata": {"name": "user-storage-alice-dtu-dk"}, "spec": {}, "status": {"phase": "Bound"}}
    events = [{"metadata": {"name": "e1"}, "involvedObject": {"kind": "Pod", "name": "jupyter-alice-dtu-dk"},
               "type": "Warning", "reason": "FailedScheduling", "message": "0/1 nodes are available",
               "lastTimestamp": "2027-01-15T07:58:10Z"},
              {"metadata": {"name": "e2"}, "involvedObject": {"kind": "Pod", "name": "jupyter-alice-dtu-dk"},
               "type": "Normal", "reason": "Pulled", "message": "pulled", "lastTimestamp": "2027-01-15T07:58:20Z"}]
    ws(4, compact({"pod": pod, "claim": claim, "events": events}))
for quantity in ["500m", "1.5Gi", "1e3", "2", "0.1", "0.0001", "100m", "1Ki", "12E", "1.5e-3", "8Gi", "+1M", "0"]:
    ws(5, quantity)
for name in ["alice@dtu.dk", "system:serviceaccount:team-a:notebook", "Bob@Example.ORG", "x.serviceaccount", "ab"]:
    ws(6, name)
for text in ["90s", "1h2m3s", "1.5m", "300ms", "0", "2h45m", "1µs", "+5m", "100ns"]:
    ws(7, text)
for body in [{"yaml_url": "https://raw.githubusercontent.com/deic-dk/pod_manifests/main/jupyter.yaml", "user_id": "alice@dtu.dk"},
             {"yaml_url": "https://raw.githubusercontent.com/deic-dk/pod_manifests/main/jupyter.yaml", "user_id": "alice@dtu.dk",
              "settings": {"jupyter": {"FILE": "x"}}},
             {"user_id": "alice"}]:
    ws(8, compact(body))

for target, items in sorted(out.items()):
    directory = os.path.join("fuzz/corpus", target)
    os.makedirs(directory, exist_ok=True)
    for data in items:
        with open(os.path.join(directory, hashlib.sha1(data).hexdigest()), "wb") as f:
            f.write(data)
    print(f"{target}: {len(items)} seeds")
PY
}

cmin() {
  local targets=("$@")
  [ ${#targets[@]} -gt 0 ] || targets=("${TARGETS[@]}")
  for target in "${targets[@]}"; do
    local work=fuzz/target/work/$target merged
    merged=$(mktemp -d)
    mkdir -p "$work"
    cp fuzz/corpus/"$target"/* "$merged"/ 2>/dev/null || true
    cp "$work"/* "$merged"/ 2>/dev/null || true
    # cmin keeps the smallest inputs that reach every edge the union reaches (edges only, not
    # hit counts: -use_counters=0), which keeps each corpus under 1 MB. The checked-in corpus is
    # replaced only once that succeeded.
    (cd fuzz && cargo +nightly fuzz cmin "${BUILD_FLAGS[@]}" "$target" "$merged" -- \
      -use_counters=0 -timeout=10 -rss_limit_mb=2048)
    rm -rf "fuzz/corpus/$target" && mkdir -p "fuzz/corpus/$target"
    cp "$merged"/* "fuzz/corpus/$target"/
    rm -rf "$merged"
    echo "$target: $(find "fuzz/corpus/$target" -type f | wc -l) inputs, $(du -sh --apparent-size "fuzz/corpus/$target" | cut -f1)"
  done
}

case "${1:-}" in
  --ci)
    seconds=${2:-30}
    start=$(date +%s)
    ensure_tools
    echo "fuzz tools: $(($(date +%s) - start)) s"
    build
    echo "fuzz tools and build: $(($(date +%s) - start)) s"
    # One target per core at once (libFuzzer runs on one thread), each its full time; each
    # target's output is printed whole when it ends, so parallel runs do not interleave.
    failed=()
    logs=$(mktemp -d)
    running=()
    finish() {
      local target=$1
      if wait "${pids[$target]}"; then :; else failed+=("$target"); fi
      echo "== fuzz $target for $seconds s"
      cat "$logs/$target.log"
    }
    declare -A pids=()
    for target in "${TARGETS[@]}"; do
      if [ ${#running[@]} -ge "$(nproc)" ]; then
        finish "${running[0]}"
        running=("${running[@]:1}")
      fi
      (work=$(mktemp -d); status=0; run_target "$target" "$seconds" "$work" || status=$?; rm -rf "$work"; exit "$status") \
        >"$logs/$target.log" 2>&1 &
      pids[$target]=$!
      running+=("$target")
    done
    for target in "${running[@]}"; do finish "$target"; done
    rm -rf "$logs"
    echo "fuzzing: $(($(date +%s) - start)) s in all"
    if [ ${#failed[@]} -gt 0 ]; then
      echo "fuzz targets failed: ${failed[*]} (reproducers above; RELIABILITY.md says what to do)" >&2
      exit 1
    fi
    ;;
  run)
    target=${2:?usage: hack/fuzz.sh run TARGET [SECONDS] [libFuzzer args...]}
    seconds=${3:-60}
    shift $(($# < 3 ? $# : 3))
    run_target "$target" "$seconds" "$root/fuzz/target/work/$target" "$@"
    ;;
  repro)
    target=${2:?usage: hack/fuzz.sh repro TARGET FILE...}
    shift 2
    files=()
    for file in "$@"; do files+=("$(realpath "$file")"); done
    (cd fuzz && RUST_BACKTRACE=1 cargo +nightly fuzz run "${BUILD_FLAGS[@]}" "$target" "${files[@]}" -- -runs=1)
    ;;
  seed) seed ;;
  cmin) shift; cmin "$@" ;;
  build) build ;;
  tools) ensure_tools ;;
  *) sed -n '2,21p' "$0"; exit 2 ;;
esac
