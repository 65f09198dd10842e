"""Slow-loris HTTP endpoints in a process of their own: `python drip_server.py N INTERVAL`
listens on N ports of 127.0.0.1, prints them on one line, and answers every request by
sending its status line one byte every INTERVAL seconds, so each request lasts until the
client gives up. Each line read on stdin is answered with the number of connections
accepted so far. Runs until stdin closes."""

from __future__ import annotations

import asyncio
import sys


async def main(count: int, interval: float) -> None:
    accepted = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal accepted
        accepted += 1
        try:
            await reader.readuntil(b"\r\n\r\n")
            for byte in b"HTTP/1.1 200 OK\r\n":
                writer.write(bytes([byte]))
                await writer.drain()
                await asyncio.sleep(interval)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    servers = [
        await asyncio.start_server(handle, "127.0.0.1", 0, backlog=1024) for _ in range(count)
    ]
    print(" ".join(str(s.sockets[0].getsockname()[1]) for s in servers), flush=True)
    loop = asyncio.get_running_loop()
    while await loop.run_in_executor(None, sys.stdin.readline):
        print(accepted, flush=True)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), float(sys.argv[2])))
