#!/usr/bin/env python3
"""The huge-patch probe of issue 33 (point 6) against a running `outfit serve` on loopback: the
notebook review (tests/fixtures/admission/pod-create-notebook.json) with its containers replaced
by N minimal ones, which the workspace example's PodDefaults each give env and mounts. Sent once,
then four at once, with the server's resident memory sampled every 10 ms meanwhile. Figures for
RELIABILITY.md ("The webhook under a review that asks for a huge patch"). Standard library only;
only 127.0.0.1 is ever a target.

usage: hack/serve-huge-patch.py --port PORT --pid PID --ca CA_FILE [--containers 100000]
       hack/serve-huge-patch.py --smoke   (a few seconds: starts target/debug/outfit serve itself
                                           with --max-patch-bytes 65536, sends 2,000 containers
                                           once and four at once, and checks each is refused 413)
"""

import argparse
import base64
import json
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import http.client

HOST = "127.0.0.1"
FIXTURE = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "admission",
                       "pod-create-notebook.json")


def status_kib(pid, field):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} for {pid}")


def review(containers):
    with open(FIXTURE) as fixture:
        body = json.load(fixture)
    body["request"]["object"]["spec"]["containers"] = [
        {"name": f"c{i}", "image": "busybox"} for i in range(containers)]
    return json.dumps(body, separators=(",", ":")).encode()


def send(port, context, body, answers):
    connection = http.client.HTTPSConnection(HOST, port, context=context, timeout=120)
    try:
        connection.request("POST", "/mutate", body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        text = response.read()
    except OSError as error:  # a body over --max-body-bytes is answered 413 before it is read
        answers.append({"error": str(error)})
        return
    finally:
        connection.close()
    try:
        answer = json.loads(text)["response"]
    except (ValueError, KeyError):
        answer = {"error": text[:200].decode(errors="replace")}
    patch = answer.get("patch")
    answers.append({
        "status": response.status,
        "response bytes": len(text),
        "allowed": answer.get("allowed"),
        "patch bytes": len(base64.b64decode(patch)) if patch else 0,
        "message": answer.get("status", {}).get("message", answer.get("error", ""))[:160],
    })


def round_of(port, context, pid, body, parallel):
    """Sends `parallel` copies of `body` at once; returns the answers and RSS before and peak."""
    answers = []
    threads = [threading.Thread(target=send, args=(port, context, body, answers))
               for _ in range(parallel)]
    before = peak = status_kib(pid, "VmRSS")
    started = time.monotonic()
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        peak = max(peak, status_kib(pid, "VmRSS"))
        time.sleep(0.01)
    return answers, before, peak, time.monotonic() - started


def free_port():
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def probe(port, pid, ca, containers):
    """Both rounds; returns every answer."""
    context = ssl.create_default_context(cafile=ca)
    context.check_hostname = False
    body = review(containers)
    print(f"review: {containers} containers, {len(body)} bytes")
    every = []
    for parallel in (1, 4):
        answers, before, peak, seconds = round_of(port, context, pid, body, parallel)
        after = status_kib(pid, "VmRSS")
        print(f"{parallel} at once ({seconds:.1f} s): RSS before {before / 1024:.1f} MiB, "
              f"peak {peak / 1024:.1f} MiB (+{(peak - before) / 1024:.1f}), after {after / 1024:.1f} MiB, "
              f"VmHWM {status_kib(pid, 'VmHWM') / 1024:.1f} MiB")
        for answer in answers:
            print("  ", answer)
        every.extend(answers)
    return every


def smoke():
    """Starts outfit serve with a small patch bound and checks that the probe is refused."""
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(root, "target"))
    binary = os.path.join(target, "debug", "outfit")
    port, admin = free_port(), free_port()
    with tempfile.TemporaryDirectory() as certs:
        server = subprocess.Popen(
            [binary, "serve", "--policies", os.path.join(root, "examples", "workspace", "policies"),
             "--self-signed", certs, "--listen", f"{HOST}:{port}", "--admin-listen", f"{HOST}:{admin}",
             "--max-patch-bytes", "65536", "--log", "warn"])
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    connection = http.client.HTTPConnection(HOST, admin, timeout=2)
                    connection.request("GET", "/readyz")
                    if connection.getresponse().status == 200:
                        break
                except OSError:
                    pass
                if server.poll() is not None or time.monotonic() > deadline:
                    sys.exit("serve-huge-patch smoke: outfit serve did not become ready")
                time.sleep(0.1)
            answers = probe(port, server.pid, os.path.join(certs, "ca.crt"), 2_000)
        finally:
            server.terminate()
            server.wait(timeout=30)
    refused = [a for a in answers if a.get("status") == 200 and a.get("allowed") is False
               and "65536" in a.get("message", "")]
    if len(refused) != len(answers) or len(answers) != 5:
        sys.exit(f"serve-huge-patch smoke: expected 5 refusals naming the bound, got {answers}")
    print("serve-huge-patch smoke: 5 of 5 refused past the bound")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--port", type=int)
    parser.add_argument("--pid", type=int)
    parser.add_argument("--ca")
    parser.add_argument("--containers", type=int, default=100_000)
    args = parser.parse_args()
    if args.smoke:
        smoke()
        return
    if args.port is None or args.pid is None or args.ca is None:
        parser.error("--port, --pid and --ca are needed (or --smoke)")
    probe(args.port, args.pid, args.ca, args.containers)


if __name__ == "__main__":
    main()
