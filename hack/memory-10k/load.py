"""Usage: load.py PORT CA_FILE SECONDS THREADS PID [POLICY_FILE_TO_REWRITE]

Sends AdmissionReviews to outfit serve from THREADS keep-alive TLS connections for SECONDS,
while (with --reload) rewriting one policy file every 2 s; counts answers that are not 200 with
the request's uid and allowed: true, and samples outfit's RSS. Python: its own throughput is the
limit (a few hundred reviews/s), which is load, not a benchmark."""
import http.client, json, ssl, sys, threading, time, os, uuid
port, ca, seconds, threads, pid = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
reload_file = sys.argv[6] if len(sys.argv) > 6 else None
ctx = ssl.create_default_context(cafile=ca)
def review(ns, labels):
    uid = str(uuid.uuid4())
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": ns, "labels": labels},
           "spec": {"containers": [{"name": "a", "image": "nginx"}, {"name": "b", "image": "busybox"}]}}
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"}, "namespace": ns,
        "operation": "CREATE", "userInfo": {"username": "load"}, "object": pod}}
    return uid, json.dumps(body).encode()
stats = {"ok": 0, "bad": 0, "patched": 0}
lock = threading.Lock()
end = time.time() + seconds
def worker(i):
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx)
    n = 0
    while time.time() < end:
        n += 1
        ns = f"ns-{(i * 7 + n) % 100}"
        labels = {f"pd-{(i * 7 + n) % 100 + 100 * k}": "true" for k in range(2)}
        uid, body = review(ns, labels)
        try:
            conn.request("POST", "/mutate", body, {"Content-Type": "application/json"})
            r = conn.getresponse(); data = r.read()
            answer = json.loads(data)["response"]
            good = r.status == 200 and answer["uid"] == uid and answer["allowed"]
            with lock:
                stats["ok" if good else "bad"] += 1
                stats["patched"] += 1 if answer.get("patch") else 0
            if not good: print("bad answer", r.status, data[:300])
        except Exception as e:
            with lock: stats["bad"] += 1
            print("error", e); conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx)
rss = []
def sampler():
    while time.time() < end:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS"): rss.append(int(line.split()[1]))
        time.sleep(0.5)
reloads = 0
def reloader():
    global reloads
    original = open(reload_file).read()
    k = 0
    while time.time() < end - 3:
        time.sleep(2); k += 1
        with open(reload_file + ".tmp", "w") as f: f.write(original if k % 2 == 0 else original.replace("value: \"g0\"", "value: \"g0-%d\"" % k))
        os.rename(reload_file + ".tmp", reload_file)
        reloads += 1
    with open(reload_file, "w") as f: f.write(original)
ts = [threading.Thread(target=worker, args=(i,)) for i in range(threads)] + [threading.Thread(target=sampler)]
if reload_file: ts.append(threading.Thread(target=reloader))
start = time.time()
for t in ts: t.start()
for t in ts: t.join()
took = time.time() - start
ok = stats["bad"] == 0
print(json.dumps({"seconds": round(took, 1), "reviews": stats["ok"] + stats["bad"], "per_second": round((stats["ok"] + stats["bad"]) / took),
                  "bad": stats["bad"], "patched": stats["patched"], "file_rewrites": reloads,
                  "rss_mib": {"min": round(min(rss) / 1024, 1), "max": round(max(rss) / 1024, 1), "end": round(rss[-1] / 1024, 1)}}))
sys.exit(0 if ok else 1)
