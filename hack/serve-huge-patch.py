#!/usr/bin/env python3
"""The huge-patch probe of issue 33 (point 6) against a running `outfit serve` on loopback: the
notebook review (tests/fixtures/admission/pod-create-notebook.json) with its containers replaced
by N minimal ones, which the workspace example's PodDefaults each give env and mounts. Sent once,
then four at once, with the server's resident memory sampled every 10 ms meanwhile. Figures for
RELIABILITY.md ("The webhook under a review that asks for a huge patch"). Standard library only;
only 127.0.0.1 is ever a target.

usage: hack/serve-huge-patch.py --port PORT --pid PID --ca CA_FILE [--containers 100000]
"""

import argparse
import base64
import json
import os
import ssl
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


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--pid", type=int, required=True)
    parser.add_argument("--ca", required=True)
    parser.add_argument("--containers", type=int, default=100_000)
    args = parser.parse_args()
    context = ssl.create_default_context(cafile=args.ca)
    context.check_hostname = False
    body = review(args.containers)
    print(f"review: {args.containers} containers, {len(body)} bytes")
    for parallel in (1, 4):
        answers, before, peak, seconds = round_of(args.port, context, args.pid, body, parallel)
        after = status_kib(args.pid, "VmRSS")
        print(f"{parallel} at once ({seconds:.1f} s): RSS before {before / 1024:.1f} MiB, "
              f"peak {peak / 1024:.1f} MiB (+{(peak - before) / 1024:.1f}), after {after / 1024:.1f} MiB, "
              f"VmHWM {status_kib(args.pid, 'VmHWM') / 1024:.1f} MiB")
        for answer in answers:
            print("  ", answer)


if __name__ == "__main__":
    main()
