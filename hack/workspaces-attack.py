#!/usr/bin/env python3
"""The attacks of issue 26 against a running `outfit workspaces` on loopback, with the backend's
resident memory before and after each: unique bearer tokens (large ones refused unread, small
ones reviewed and remembered), bodies sent a byte at a time, and a flood of idle connections.
Figures for RELIABILITY.md ("Workspace backend under attack"). Standard library only; every loop
is bounded in count and time, and only 127.0.0.1 is ever a target.

usage: hack/workspaces-attack.py --port PORT --pid PID [--tokens 400] [--slow 200] [--idle 2000]
                                 [--slow-seconds 60] [--check]

--check: exit 1 unless the backend held: every token refused 401, every slow body answered (408)
or closed before the end, and the request during the idle flood answered 200.
(hack/workspaces-attack.sh starts a cluster and a backend and runs this against them.)
"""

import argparse
import asyncio
import os
import secrets
import time

HOST = "127.0.0.1"


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


async def request(port, head, timeout=30):
    """Sends `head` (a whole request) and returns the status, or None if the connection closed."""
    reader, writer = await asyncio.open_connection(HOST, port)
    try:
        writer.write(head)
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), timeout)
        return int(line.split()[1]) if line else None
    finally:
        writer.close()


async def tokens(port, count, size, parallel=16):
    statuses = {}
    gate = asyncio.Semaphore(parallel)

    async def one():
        token = secrets.token_urlsafe(size)[:size]
        head = (f"GET /api/v1/me HTTP/1.1\r\nhost: {HOST}\r\nauthorization: Bearer {token}\r\n"
                "connection: close\r\n\r\n").encode()
        async with gate:
            status = await request(port, head)
        statuses[status] = statuses.get(status, 0) + 1

    await asyncio.gather(*(one() for _ in range(count)))
    return statuses


async def slow_bodies(port, count, pid, seconds):
    """`count` connections each sending a 1000-byte body one byte a second, for up to `seconds`."""
    peak = [rss_mib(pid)]

    async def one():
        reader, writer = await asyncio.open_connection(HOST, port)
        writer.write(b"POST /get_pods HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                     b"content-length: 1000\r\n\r\n")
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline:
                writer.write(b" ")
                await writer.drain()
                try:
                    line = await asyncio.wait_for(reader.readline(), 1)
                except asyncio.TimeoutError:
                    continue
                return int(line.split()[1]) if line else "closed"
            return "still open"
        except (ConnectionError, OSError):
            return "closed"
        finally:
            writer.close()

    async def sample():
        while True:
            peak[0] = max(peak[0], rss_mib(pid))
            await asyncio.sleep(0.5)

    sampler = asyncio.create_task(sample())
    outcomes = await asyncio.gather(*(one() for _ in range(count)))
    sampler.cancel()
    counted = {}
    for outcome in outcomes:
        counted[outcome] = counted.get(outcome, 0) + 1
    return counted, peak[0]


async def idle_flood(port, count, pid):
    """Opens `count` connections that send nothing, then asks one real request."""
    connections = []
    for _ in range(count):
        connections.append(await asyncio.open_connection(HOST, port))
    await asyncio.sleep(2)
    held = rss_mib(pid)
    closed = 0
    for reader, _ in connections:
        try:
            if await asyncio.wait_for(reader.read(1), 0.01) == b"":
                closed += 1
        except asyncio.TimeoutError:
            pass
        except (ConnectionError, OSError):
            closed += 1
    served = await request(port, b"GET /api/v1/openapi.json HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
    for _, writer in connections:
        writer.close()
    return closed, held, served


async def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--pid", type=int, required=True, help="the backend's process id")
    parser.add_argument("--tokens", type=int, default=400)
    parser.add_argument("--slow", type=int, default=200)
    parser.add_argument("--slow-seconds", type=int, default=60)
    parser.add_argument("--idle", type=int, default=2000)
    parser.add_argument("--check", action="store_true", help="exit 1 unless the backend held")
    args = parser.parse_args()
    failures = []
    pid = args.pid
    print(f"start: RSS {rss_mib(pid):.1f} MiB")
    for size in (380 * 1024, 7 * 1024):
        started = time.monotonic()
        statuses = await tokens(args.port, args.tokens, size)
        print(f"{args.tokens} unique {size // 1024} KiB tokens: {statuses} in "
              f"{time.monotonic() - started:.1f} s; RSS {rss_mib(pid):.1f} MiB")
        if set(statuses) != {401}:
            failures.append(f"{size // 1024} KiB tokens answered {statuses}, not all 401")
    outcomes, peak = await slow_bodies(args.port, args.slow, pid, args.slow_seconds)
    await asyncio.sleep(1)
    print(f"{args.slow} bodies at 1 byte/s: {outcomes}; RSS peak {peak:.1f} MiB, after {rss_mib(pid):.1f} MiB")
    if "still open" in outcomes:
        failures.append(f"slow bodies still open after {args.slow_seconds} s: {outcomes}")
    closed, held, served = await idle_flood(args.port, args.idle, pid)
    await asyncio.sleep(1)
    print(f"{args.idle} idle connections: {closed} closed by the backend, RSS while held {held:.1f} MiB; "
          f"a request then: {served}; RSS after {rss_mib(pid):.1f} MiB")
    if served != 200:
        failures.append(f"the request during the idle flood answered {served}")
    if args.check and failures:
        raise SystemExit("the backend did not hold: " + "; ".join(failures))


if __name__ == "__main__":
    if os.name != "posix":
        raise SystemExit("reads /proc: Linux only")
    asyncio.run(main())
