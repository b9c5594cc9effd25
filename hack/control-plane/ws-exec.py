#!/usr/bin/env python3
"""Minimal pods/exec client over WebSocket (stdlib only), for smoke-nodes.sh.

usage: ws-exec.py [--protocol v5.channel.k8s.io] [--container C] NAMESPACE POD CMD [ARG...]

Reads APISERVER_URL, APISERVER_CA and ADMIN_TOKEN (or TOKEN) from the
environment (source STATE_DIR/env first). Sends
GET /api/v1/namespaces/NS/pods/POD/exec?command=...&stdout=true&stderr=true
with Upgrade: websocket and the given subprotocol, then collects the
channel-multiplexed binary frames (1 = stdout, 2 = stderr, 3 = status) until
the server closes. Prints one JSON object:
  {"http": 101, "protocol": "...", "stdout": "...", "stderr": "...", "status": {...}}
or {"http": N, "body": "..."} when the upgrade is refused. Exit 0 when the
status is Success.
"""
import base64
import json
import os
import socket
import ssl
import struct
import sys
import urllib.parse


def main() -> int:
    args = sys.argv[1:]
    protocol = "v5.channel.k8s.io"
    container = None
    while args and args[0].startswith("--"):
        flag = args.pop(0)
        if flag == "--protocol":
            protocol = args.pop(0)
        elif flag == "--container":
            container = args.pop(0)
        else:
            print(__doc__, file=sys.stderr)
            return 2
    if len(args) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    ns, pod, cmd = args[0], args[1], args[2:]

    url = urllib.parse.urlparse(os.environ["APISERVER_URL"])
    token = os.environ.get("TOKEN") or os.environ["ADMIN_TOKEN"]
    query = [("command", c) for c in cmd] + [("stdout", "true"), ("stderr", "true")]
    if container:
        query.append(("container", container))
    path = f"/api/v1/namespaces/{ns}/pods/{pod}/exec?" + urllib.parse.urlencode(query)

    ctx = ssl.create_default_context(cafile=os.environ["APISERVER_CA"])
    raw = socket.create_connection((url.hostname, url.port), timeout=20)
    sock = ctx.wrap_socket(raw, server_hostname=url.hostname)
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        (
            f"GET {path} HTTP/1.1\r\n"
            f"Host: {url.hostname}:{url.port}\r\n"
            f"Authorization: Bearer {token}\r\n"
            "Upgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
            f"Sec-WebSocket-Protocol: {protocol}\r\n\r\n"
        ).encode()
    )

    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            break
        buf += chunk
    head, _, buf = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    code = int(lines[0].split()[1]) if lines and len(lines[0].split()) > 1 else 0
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    if code != 101:
        body = buf
        try:
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                body += chunk
        except (socket.timeout, ssl.SSLError):
            pass
        print(json.dumps({"http": code, "body": body.decode("utf-8", "replace")}))
        return 1

    out = {1: b"", 2: b"", 3: b""}

    def recv_exact(n: int) -> bytes:
        nonlocal buf
        while len(buf) < n:
            chunk = sock.recv(65536)
            if not chunk:
                raise EOFError
            buf += chunk
        data, buf = buf[:n], buf[n:]
        return data

    try:
        while True:
            b0, b1 = recv_exact(2)
            opcode = b0 & 0x0F
            length = b1 & 0x7F
            if length == 126:
                (length,) = struct.unpack(">H", recv_exact(2))
            elif length == 127:
                (length,) = struct.unpack(">Q", recv_exact(8))
            if b1 & 0x80:
                recv_exact(4)  # servers do not mask; tolerate it anyway
            payload = recv_exact(length)
            if opcode == 0x8:  # close
                break
            if opcode in (0x1, 0x2) and payload:
                ch, data = payload[0], payload[1:]
                if opcode == 0x1:  # base64.* protocols: text frames, ASCII channel digit
                    ch, data = ch - ord("0"), base64.b64decode(data)
                out[ch] = out.get(ch, b"") + data
    except EOFError:
        pass
    status = {}
    if out[3]:
        try:
            status = json.loads(out[3])
        except ValueError:
            status = {"raw": out[3].decode("utf-8", "replace")}
    print(
        json.dumps(
            {
                "http": code,
                "protocol": headers.get("sec-websocket-protocol", ""),
                "stdout": out[1].decode("utf-8", "replace"),
                "stderr": out[2].decode("utf-8", "replace"),
                "status": status,
            }
        )
    )
    return 0 if status.get("status") == "Success" else 1


if __name__ == "__main__":
    sys.exit(main())
