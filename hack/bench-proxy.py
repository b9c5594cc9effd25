#!/usr/bin/env python3
"""The proxy benchmark's helpers (hack/bench-proxy.sh), in the standard library only:

  echo ADDRESS PORT                  a WebSocket echo server (the workspace's app for WebSockets)
  rtt NAME URL HOST CONNECTIONS SECONDS
                                     WebSocket round trips through URL with `Host: HOST`: each
                                     connection sends a 32-byte message and waits for its echo,
                                     again and again; prints the table's row for NAME
  routes URL COUNT                   adds COUNT routes to configurable-http-proxy's API at URL
  route-live ...                     see route_live(): from a pod's Ready to its route answering

One Python process drives every connection of a run, so at many connections the client is the
bottleneck; the rows compare the paths under the same client, not the paths' ceilings.
"""

import asyncio
import base64
import hashlib
import json
import os
import ssl
import statistics
import struct
import sys
import threading
import time
import urllib.error
import urllib.request

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


async def read_frame(reader):
    """One frame: (opcode, payload), unmasked."""
    head = await reader.readexactly(2)
    opcode, length = head[0] & 0x0F, head[1] & 0x7F
    if length == 126:
        (length,) = struct.unpack("!H", await reader.readexactly(2))
    elif length == 127:
        (length,) = struct.unpack("!Q", await reader.readexactly(8))
    mask = await reader.readexactly(4) if head[1] & 0x80 else None
    payload = await reader.readexactly(length)
    if mask:
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return opcode, payload


def frame(opcode, payload, masked):
    """A final frame; a client's is masked (RFC 6455 5.3)."""
    head = bytes([0x80 | opcode])
    size = len(payload)
    bit = 0x80 if masked else 0
    if size < 126:
        head += bytes([bit | size])
    elif size < 65536:
        head += bytes([bit | 126]) + struct.pack("!H", size)
    else:
        head += bytes([bit | 127]) + struct.pack("!Q", size)
    if not masked:
        return head + payload
    mask = os.urandom(4)
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


async def read_head(reader):
    """An HTTP head: the status or request line and the headers, lower-cased names."""
    raw = await reader.readuntil(b"\r\n\r\n")
    lines = raw.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    return lines[0], headers


async def echo_connection(reader, writer):
    try:
        _, headers = await read_head(reader)
        key = headers.get("sec-websocket-key", "").encode()
        accept = base64.b64encode(hashlib.sha1(key + GUID).digest()).decode()
        writer.write(
            (
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Accept: {accept}\r\n\r\n"
            ).encode()
        )
        while True:
            opcode, payload = await read_frame(reader)
            if opcode == 8:  # close: answer it and go
                writer.write(frame(8, payload[:2], masked=False))
                break
            reply = 10 if opcode == 9 else opcode  # a ping gets a pong, anything else itself
            writer.write(frame(reply, payload, masked=False))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def echo(address, port):
    server = await asyncio.start_server(echo_connection, address, int(port), backlog=2048)
    async with server:
        await server.serve_forever()


async def connect(url, host):
    """A WebSocket to URL (http://ADDRESS:PORT) naming HOST."""
    address, port = url.removeprefix("http://").rstrip("/").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(address, int(port))
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write(
        (
            f"GET /socket HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    status, _ = await read_head(reader)
    if " 101 " not in status + " ":
        raise RuntimeError(f"{url} (Host: {host}) answered {status!r} to the upgrade")
    return reader, writer


async def round_trips(url, host, connections, seconds):
    sockets = [await connect(url, host) for _ in range(connections)]
    message = b"x" * 32
    latencies = []
    end = time.monotonic() + seconds

    async def loop(reader, writer):
        while time.monotonic() < end:
            began = time.perf_counter()
            writer.write(frame(1, message, masked=True))
            _, payload = await read_frame(reader)
            latencies.append(time.perf_counter() - began)
            if payload != message:
                raise RuntimeError(f"the echo was {payload!r}")

    began = time.monotonic()
    await asyncio.gather(*(loop(r, w) for r, w in sockets))
    took = time.monotonic() - began
    for _, writer in sockets:
        writer.close()
    return len(latencies) / took, latencies


def rtt(name, url, host, connections, seconds):
    count, took = int(connections), float(seconds)
    rate, latencies = asyncio.run(round_trips(url, host, count, took))
    cuts = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else latencies * 99
    print(f"| {name} | WebSocket | {count} | {rate:,.0f} | {cuts[49] * 1e3:.2f} | {cuts[98] * 1e3:.2f} | |")


def routes(api_url, count):
    """COUNT routes on configurable-http-proxy, each to its own target, as JupyterHub adds them."""
    for i in range(int(count)):
        body = json.dumps({"target": f"http://10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}:8888"})
        request = urllib.request.Request(
            f"{api_url}/api/routes/user/u{i}", data=body.encode(), method="POST",
            headers={"Content-Type": "application/json"},
        )
        urllib.request.urlopen(request, timeout=10).read()


def route_live(apiserver, ca, token, namespace, pod, proxy_url, host, timeout):
    """Seconds from the API server's watch showing pod POD Ready to the proxy first answering HOST
    with anything but its not-running page (503): both read on this machine's clock, the watch
    and the polling (every millisecond) side by side. Prints `MILLISECONDS STATUS`."""
    context = ssl.create_default_context(cafile=ca)
    ready_at, routed = [], []
    deadline = time.monotonic() + float(timeout)

    def watch():
        url = (
            f"{apiserver}/api/v1/namespaces/{namespace}/pods?watch=true"
            f"&fieldSelector=metadata.name%3D{pod}&timeoutSeconds={int(float(timeout))}"
        )
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(request, context=context, timeout=float(timeout)) as stream:
            for line in stream:
                event = json.loads(line)
                conditions = event["object"].get("status", {}).get("conditions", [])
                if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions):
                    ready_at.append(time.monotonic())
                    return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    while time.monotonic() < deadline and not routed:
        # The time it was sent: an answer from a pod the machine can't reach comes only at the
        # proxy's connect deadline, yet the route was live when it was asked.
        sent = time.monotonic()
        request = urllib.request.Request(f"{proxy_url}/", headers={"Host": host})
        try:
            status = urllib.request.urlopen(request, timeout=5).status
        except urllib.error.HTTPError as error:
            status = error.code
        except OSError:
            status = 0
        if status not in (0, 503):
            routed.append((sent, status))
        else:
            time.sleep(0.001)
    watcher.join(timeout=max(0.0, deadline - time.monotonic()))
    if not ready_at or not routed:
        sys.exit(f"route-live: ready seen {bool(ready_at)}, route answered {bool(routed)} within {timeout}s")
    print(f"{(routed[0][0] - ready_at[0]) * 1000:.1f} {routed[0][1]}")


def main():
    command, args = sys.argv[1], sys.argv[2:]
    if command == "echo":
        asyncio.run(echo(*args))
    elif command == "rtt":
        rtt(*args)
    elif command == "routes":
        routes(*args)
    elif command == "route-live":
        route_live(*args)
    else:
        sys.exit(f"unknown command {command!r}")


if __name__ == "__main__":
    main()
