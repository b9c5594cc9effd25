#!/usr/bin/env python3
"""A TCP proxy whose downloads share one rate: what the real node pulls from the registry through
it moves at most MBPS megabytes (10^6 bytes) a second in all, as pulls share a site's link. Uploads
(requests) pass as they come. real-node.sh starts it for OUTFIT_CP_REGISTRY_MBPS.

usage: throttle.py LISTEN_PORT TARGET_PORT MBPS   (both on 127.0.0.1)
"""

import asyncio
import sys
import time

CHUNK = 64 * 1024


class Link:
    """One rate for every connection: each chunk waits for its turn on the link."""

    def __init__(self, bytes_per_second):
        self.rate = bytes_per_second
        self.free_at = time.monotonic()

    async def send(self, size):
        now = time.monotonic()
        start = max(now, self.free_at)
        self.free_at = start + size / self.rate
        if self.free_at > now:
            await asyncio.sleep(self.free_at - now)


async def pipe(reader, writer, link=None):
    try:
        while chunk := await reader.read(CHUNK):
            if link is not None:
                await link.send(len(chunk))
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


async def main(listen, target, mbps):
    link = Link(mbps * 1_000_000)

    async def serve(client_reader, client_writer):
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", target)
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(pipe(client_reader, upstream_writer),
                             pipe(upstream_reader, client_writer, link))

    server = await asyncio.start_server(serve, "127.0.0.1", listen)
    print(f"throttle: 127.0.0.1:{listen} -> 127.0.0.1:{target} at {mbps} MB/s", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])))
