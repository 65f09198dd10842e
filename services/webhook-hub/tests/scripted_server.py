"""A real local HTTP/1.1 server that answers what a test scripts, byte for byte, and counts
the connections it was given and still holds."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field


@dataclass
class Reply:
    data: bytes = b""
    close: bool = False  # hang up after writing `data` (FIN)
    reset: bool = False  # hang up after writing `data` with a reset (RST: SO_LINGER 0)
    silent: bool = False  # write nothing and keep the connection open
    pause: float = 0.0  # seconds before writing (or hanging up)


# Given the request's number (from 1), what the server does.
Script = Callable[[int], Reply]


@dataclass
class ScriptedServer:
    port: int = 0
    connections: int = 0
    open: int = 0  # connections not closed yet
    requests: list[bytes] = field(default_factory=list)
    received: asyncio.Event = field(default_factory=asyncio.Event)


async def _read_request(reader: asyncio.StreamReader) -> bytes | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            length = int(value)
    return head + await reader.readexactly(length)


ServerFactory = Callable[[Script], Awaitable[ScriptedServer]]


async def start_scripted(script: Script) -> tuple[ScriptedServer, asyncio.Server]:
    state = ScriptedServer()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        state.connections += 1
        state.open += 1
        # The client hanging up, or the server closing, ends the connection like any other.
        try:
            with contextlib.suppress(ConnectionError, asyncio.CancelledError):
                while (request := await _read_request(reader)) is not None:
                    state.requests.append(request)
                    state.received.set()
                    reply = script(len(state.requests))
                    if reply.silent:
                        await asyncio.sleep(3600)
                    await asyncio.sleep(reply.pause)
                    writer.write(reply.data)
                    await writer.drain()
                    if reply.reset:
                        reset(writer)
                        break
                    if reply.close:
                        break
        finally:
            state.open -= 1
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    state.port = server.sockets[0].getsockname()[1]
    return state, server


def reset(writer: asyncio.StreamWriter) -> None:
    """Close with RST rather than FIN: a linger of 0 s drops the connection at once."""
    sock: socket.socket = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


def answer(status: int = 200, body: bytes = b"ok", extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 %d X\r\ncontent-length: %d\r\n%s\r\n%s" % (status, len(body), extra, body)


def always(reply: Reply) -> Script:
    return lambda _: reply
