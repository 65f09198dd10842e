"""The browser's only way out: an HTTP forward proxy of our own on 127.0.0.1, through which
Chromium is told to send everything (`--proxy-server`, loopback not bypassed).

Every request the browser makes arrives here, whatever made it (the page, a script, XHR or
fetch, a redirect hop, an iframe, a WebSocket), and is judged by the crawler's address policy
before any connection is made:

- A plain http request (`GET http://host/...`) is made again by aiohttp on the worker's
  guarded connector: the name is resolved once, every answer checked, and the connection made
  to exactly the checked address (servicekit.net.guard).
- A tunnel (`CONNECT host:443`, https and wss) is resolved once with `resolve_checked` and
  connected to that checked address: the name is never looked up again, so a DNS answer that
  changes after the check (rebinding) finds nothing to change.
- Through the scraper's proxy pool, the checked address is what the upstream proxy is given
  (`CONNECT 203.0.113.5:443`, or the http URL pinned to it with Host kept), as the HTTP
  crawler does.

A refused request is answered 403 and reported (`on_refused`); nothing reaches the address.

Each request (each plain http request, each tunnel) first takes its admission (`admit`, the
run's: its rate limit, then the host's budget shared with every run), as the crawl engine's
pages do, so a page's scripts, stylesheets, XHR, iframes and redirect hops are paced like
pages. Inside a tunnel the requests are encrypted: a tunnel is admitted once, when it opens.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver
from multidict import CIMultiDict
from servicekit.net import (
    AddressPolicy,
    AddressRefused,
    guarded_connector,
    proxy_target,
    refusal_of,
    resolve_checked,
)

MAX_HEAD_BYTES = 64 * 1024
MAX_REQUEST_BODY_BYTES = 10 * 1024 * 1024
RELAY_CHUNK = 64 * 1024
# Connection-scoped headers: never forwarded either way (RFC 9110 §7.6.1).
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
    }
)
Upstream = Callable[[], str | None]
Refused = Callable[[str, str], None]
# A request's turn (its URL): returns when it may go.
Admit = Callable[[str], Awaitable[None]]


@dataclass(frozen=True)
class ProxyRequest:
    """A request head as the browser sent it to its proxy."""

    method: str
    target: str
    headers: list[tuple[str, str]]

    def header(self, name: str) -> str | None:
        wanted = name.lower()
        return next((v for k, v in self.headers if k.lower() == wanted), None)

    @property
    def url(self) -> str:
        """The URL the request is for (a tunnel's as `https://host:port/`)."""
        if self.method == "CONNECT":
            return f"https://{self.target}/"
        return self.target


def parse_head(head: bytes) -> ProxyRequest | None:
    """A request head (up to the blank line) or None: any bytes in, a request or a refusal."""
    try:
        text = head.decode("latin-1")
    except UnicodeDecodeError:  # pragma: no cover (latin-1 decodes every byte)
        return None
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1.") or not parts[0].isalpha():
        return None
    method, target, _ = parts
    headers: list[tuple[str, str]] = []
    for line in lines[1:]:
        if not line:
            continue
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip():
            return None
        headers.append((name, value.strip()))
    if method == "CONNECT":
        return ProxyRequest(method, target, headers) if authority(target) else None
    try:
        parts_of = urlsplit(target)
        valid = parts_of.scheme == "http" and bool(parts_of.hostname) and parts_of.port != 0
    except ValueError:
        return None
    return ProxyRequest(method, target, headers) if valid else None


def authority(target: str) -> tuple[str, int] | None:
    """Host and port of a CONNECT target (`host:port`, `[v6]:port`), or None."""
    host, colon, port = target.rpartition(":")
    if not colon or not port.isascii() or not port.isdigit() or not 0 < int(port) < 65536:
        return None
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not host or any(c in host for c in "/@ \t"):
        return None
    return host, int(port)


def upstream_parts(proxy: str) -> tuple[str, int, str | None]:
    """An upstream proxy URL's host, port and Proxy-Authorization value."""
    parts = urlsplit(proxy)
    credentials = None
    if parts.username is not None:
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        credentials = "Basic " + base64.b64encode(pair.encode()).decode()
    return parts.hostname or "", parts.port or 80, credentials


async def read_head(reader: asyncio.StreamReader) -> bytes | None:
    """The bytes up to a blank line; None at a clean end of the connection."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise
    except asyncio.LimitOverrunError:
        raise ValueError("request head too large") from None
    return head[:-4]


async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> int:
    """Copy until the end; how many bytes went."""
    sent = 0
    try:
        while chunk := await reader.read(RELAY_CHUNK):
            writer.write(chunk)
            sent += len(chunk)
            await writer.drain()
    except (ConnectionError, OSError):
        # Either side hung up: the tunnel ends, which is all a closed peer asks.
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()
    return sent


class EgressProxy:
    """One run's way out for its browser pages (see the module's docstring)."""

    def __init__(
        self,
        policy: AddressPolicy,
        *,
        resolver: AbstractResolver | None = None,
        upstream: Upstream | None = None,
        upstream_failed: Callable[[str | None], None] | None = None,
        allow_internal_proxies: bool = False,
        on_refused: Refused | None = None,
        timeout_seconds: float = 30.0,
        max_response_bytes: int = 5 * 1024 * 1024,
        dns_cache: bool = True,
        admit: Admit | None = None,
    ) -> None:
        self.policy = policy
        self.resolver = resolver
        self.upstream = upstream or (lambda: None)
        self.upstream_failed = upstream_failed or (lambda proxy: None)
        self.allow_internal_proxies = allow_internal_proxies
        self.on_refused = on_refused or (lambda url, reason: None)
        self.timeout_seconds = timeout_seconds
        self.max_response_bytes = max_response_bytes
        self.dns_cache = dns_cache
        self.admit = admit or _at_once
        # What was refused, by URL (a tunnel's by `https://host:port/`), for the page to tell.
        self.refused: dict[str, str] = {}
        self.requests = 0
        self.bytes = 0
        self._server: asyncio.Server | None = None
        self._http: aiohttp.ClientSession | None = None
        self._proxy_http: aiohttp.ClientSession | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        # Bodies pass as the site sent them (compressed or not): the browser decodes them.
        self._http = aiohttp.ClientSession(
            connector=guarded_connector(
                self.policy, resolver=self.resolver, use_dns_cache=self.dns_cache
            ),
            auto_decompress=False,
        )
        self._proxy_http = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector()
            if self.allow_internal_proxies
            else guarded_connector(self.policy, resolver=self.resolver),
            auto_decompress=False,
        )
        self._server = await asyncio.start_server(
            self._accept, "127.0.0.1", 0, limit=MAX_HEAD_BYTES
        )
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        for task in list(self._connections):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
        for session in (self._http, self._proxy_http):
            if session is not None:
                await session.close()

    def _refuse(self, url: str, reason: str) -> None:
        if len(self.refused) < 10_000:
            self.refused[url] = reason
        self.on_refused(url, reason)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await self._serve(reader, writer)
        except (ConnectionError, OSError, ValueError, asyncio.IncompleteReadError, TimeoutError):
            # The browser's connection broke or sent what is not HTTP: this request ends; the
            # page sees a failed load, and refusals by the policy are logged where they happen.
            return
        finally:
            self._connections.discard(task)
            with contextlib.suppress(Exception):
                writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            head = await read_head(reader)
            if head is None:
                return
            request = parse_head(head)
            if request is None:
                await answer(writer, 400, "Bad Request", b"malformed proxy request")
                return
            self.requests += 1
            # Its turn first, as a page's (the address policy then applies as to a page).
            await self.admit(request.url)
            if request.method == "CONNECT":
                await self._tunnel(request, reader, writer)
                return
            if not await self._forward(request, reader, writer):
                return

    async def _tunnel(
        self, request: ProxyRequest, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        found = authority(request.target)
        assert found is not None  # parse_head checked it
        _, port = found
        try:
            address = await resolve_checked(request.url, self.policy, resolver=self.resolver)
        except AddressRefused as exc:
            self._refuse(request.url, str(exc))
            await answer(writer, 403, "Forbidden", f"refused: {exc}".encode())
            return
        shown = f"[{address}]" if address.version == 6 else str(address)
        proxy = self.upstream()
        try:
            if proxy is None:
                far_reader, far_writer = await asyncio.wait_for(
                    asyncio.open_connection(str(address), port), self.timeout_seconds
                )
            else:
                far_reader, far_writer = await self._upstream_tunnel(proxy, f"{shown}:{port}")
        except AddressRefused as exc:
            self._refuse(request.url, f"proxy {exc}")
            await answer(writer, 403, "Forbidden", b"refused: the proxy's address")
            return
        except (OSError, TimeoutError, ValueError):
            self.upstream_failed(proxy)
            await answer(writer, 502, "Bad Gateway", b"could not connect")
            return
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await writer.drain()
        _, down = await asyncio.gather(relay(reader, far_writer), relay(far_reader, writer))
        self.bytes += down

    async def _upstream_tunnel(
        self, proxy: str, target: str
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        host, port, credentials = upstream_parts(proxy)
        if not self.allow_internal_proxies:
            address = await resolve_checked(proxy, self.policy, resolver=self.resolver)
            host = str(address)
        far_reader, far_writer = await asyncio.wait_for(
            asyncio.open_connection(host, port, limit=MAX_HEAD_BYTES), self.timeout_seconds
        )
        head = f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n"
        if credentials is not None:
            head += f"Proxy-Authorization: {credentials}\r\n"
        far_writer.write((head + "\r\n").encode("latin-1"))
        await far_writer.drain()
        reply = await asyncio.wait_for(read_head(far_reader), self.timeout_seconds)
        status = (reply or b"").split(b" ", 2)
        if len(status) < 2 or status[1] != b"200":
            far_writer.close()
            raise OSError(f"the upstream proxy answered {reply[:80] if reply else b''!r}")
        return far_reader, far_writer

    async def _forward(
        self, request: ProxyRequest, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        """A plain http request, made again on the guarded connector; True to keep the
        browser's connection for its next request."""
        assert self._http is not None
        assert self._proxy_http is not None
        length = request.header("Content-Length")
        if request.header("Transfer-Encoding") is not None:
            await answer(writer, 411, "Length Required", b"chunked request bodies unsupported")
            return False
        size = int(length) if length and length.isascii() and length.isdigit() else 0
        if size > MAX_REQUEST_BODY_BYTES:
            await answer(writer, 413, "Content Too Large", b"request body too large")
            return False
        body = await reader.readexactly(size) if size else None
        headers = [(k, v) for k, v in request.headers if k.lower() not in HOP_BY_HOP]
        proxy = self.upstream()
        target = request.target
        session = self._http
        try:
            if proxy is not None:
                routed = await proxy_target(request.url, self.policy, resolver=self.resolver)
                target, session = routed.url, self._proxy_http
                if routed.host_header is not None:
                    headers = [(k, v) for k, v in headers if k.lower() != "host"]
                    headers.append(("Host", routed.host_header))
            async with session.request(
                request.method,
                target,
                headers=multidict(headers),
                data=body,
                proxy=proxy,
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=self.timeout_seconds),
            ) as response:
                content = await response.content.read(self.max_response_bytes)
                self.bytes += len(content)
                kept = [
                    (k.decode("latin-1"), v.decode("latin-1"))
                    for k, v in response.raw_headers
                    if k.decode("latin-1").lower() not in HOP_BY_HOP
                ]
                await respond(writer, response.status, response.reason or "", kept, content)
                return True
        except (aiohttp.ClientError, AddressRefused, TimeoutError, ValueError) as exc:
            refusal = refusal_of(exc)
            if refusal is not None:
                self._refuse(request.url, str(refusal))
                await answer(writer, 403, "Forbidden", f"refused: {refusal}".encode())
            else:
                self.upstream_failed(proxy)
                await answer(writer, 502, "Bad Gateway", type(exc).__name__.encode())
            return False


async def _at_once(url: str) -> None:
    return None


def multidict(headers: list[tuple[str, str]]) -> CIMultiDict[str]:
    return CIMultiDict(headers)


async def respond(
    writer: asyncio.StreamWriter,
    status: int,
    reason: str,
    headers: list[tuple[str, str]],
    body: bytes,
) -> None:
    lines = [f"HTTP/1.1 {status} {reason}"]
    lines += [f"{k}: {v}" for k, v in headers]
    lines.append(f"Content-Length: {len(body)}")
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
    await writer.drain()


async def answer(writer: asyncio.StreamWriter, status: int, reason: str, text: bytes) -> None:
    """The proxy's own answer; the connection ends after it."""
    headers = [("Content-Type", "text/plain"), ("Connection", "close")]
    await respond(writer, status, reason, headers, text)
