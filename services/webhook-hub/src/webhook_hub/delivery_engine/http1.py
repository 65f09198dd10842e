"""HTTP/1.1 POSTs over asyncio and httptools: the delivery engine's client, one call
(`HttpClient.post(url, headers, body, timeout)`) that owns the origins' pools, the deadlines,
the sweep of idle connections and the SSRF guard's address check.

Chosen by measurement (bench/bare.py): under the engine's load a request costs it about a
third of pyreqwest's CPU, because nothing crosses a thread. pyreqwest's Rust runtime answers
on a thread of its own, and every answer is a wake-up of the event loop's thread and a
handover of the GIL (3 context switches per request, measured). One `OriginPool` per endpoint
origin keeps that origin's kept-alive connections. It connects to the address it is given (the
one the SSRF guard checked), never looking the name up again; the name goes in `Host` and,
for https, in SNI and certificate verification. It follows no redirect, and reads at most
`limit` bytes of an answer: past that the connection is dropped unread.

An answer is complete as curl says: at its `Content-Length`, at its last chunk, or (with
neither) when the server closes the connection (FIN). One whose framing promised more than
came before the connection closed or was reset is a failure ("answer cut short"), never a
success. Only the final answer's headers count (not a 1xx's before it); a connection is not
reused after an answer with both a length and chunked framing.

This is the one module that reaches httptools (llhttp); the leniencies it sets and the
parser's behaviour under them are the pinned version's (`httptools~=0.9.0`), which
`tests/test_http1.py` checks.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, NewType, cast
from urllib.parse import quote, urlsplit

import httptools
from servicekit.net import resolve_checked

from webhook_hub.delivery_engine.endpoint_policy import EndpointGuard

# A kept-alive connection idle longer than this is closed rather than reused: servers close
# idle connections after 5 s (Node) to 75 s (nginx), and a request racing that close fails.
IDLE_SECONDS = 30.0
# A request on a kept-alive connection that closed this soon after it went, with nothing
# answered, raced the server's idle close and goes once more on a new connection. Later, the
# receiver may have taken it: that is an attempt that failed.
RESEND_WITHIN_SECONDS = 0.25
# Exchanges past their deadline are timed out by one check this often (one `Deadlines` per
# sender), not by a timer each: uvloop's `call_at` and `cancel` cost 4.3 to 4.7 µs a request,
# a set's add and discard 0.1. A timeout comes at most this much after its deadline.
DEADLINE_TICK_SECONDS = 0.05
# An answer's status line and headers may be this long at most (nginx's default buffers hold
# 32 KiB): what we keep of them is small, but a parser holds a header until it ends.
MAX_HEAD_BYTES = 64 * 1024
# The oldest TLS a client may negotiate: 1.0 and 1.1 are deprecated (RFC 8996).
MIN_TLS_VERSION = ssl.TLSVersion.TLSv1_2
# How long a checked address is trusted before the name is looked up and checked again.
RECHECK_SECONDS = 60.0
# Distinct endpoint origins with a pool at once; the least recently used go first.
MAX_ORIGINS = 4096
# Endpoint URLs whose origin and request target are remembered (parsed once).
MAX_TARGETS = 16384
# Left as they are in a request target: the reserved characters and `%` (escapes kept).
_TARGET_SAFE = "!#$%&'()*+,/:;=?@[]~"

# Header lines of a request head, each `name: value\r\n`, made by `header_lines` (which
# refuses a line break inside a name or value) or by joining such lines. One string, not a
# mapping rendered per request: that cost an attempt 2.3 µs more.
HeaderLines = NewType("HeaderLines", str)


class HttpFailure(ConnectionError):
    """The exchange failed: the connection closed before an answer, or the answer was not
    HTTP/1.1."""


@dataclass(slots=True)
class Response:
    status: int
    retry_after: str | None
    body: bytes  # at most the limit


class _Connection(asyncio.Protocol):
    """One kept-alive connection; one exchange at a time."""

    def __init__(self, limit: int, deadlines: Deadlines) -> None:
        self._limit = limit
        self._deadlines = deadlines
        self.deadline = 0.0  # of the exchange under way, on the loop's clock
        self._parser = httptools.HttpResponseParser(self)
        # As browsers and curl read them: a length beside chunked framing (the chunks win and
        # the connection is not reused), lines ended by LF alone, and header values as they
        # come, folded lines included (RFC 9112 §5.2: a client replaces an obs-fold with a
        # space; llhttp's strict mode refuses it, and aiohttp reads answers leniently too).
        self._parser.set_dangerous_leniencies(
            lenient_headers=True,
            lenient_chunked_length=True,
            lenient_optional_cr_before_lf=True,
        )
        self._transport: asyncio.Transport | None = None
        self._waiter: asyncio.Future[Response] | None = None
        self._status = 0
        self._retry_after: str | None = None
        self._body = bytearray()
        # The framing of the answer being read (its headers'): `Content-Length`, the
        # `Transfer-Encoding` codings, and the body bytes received (kept or not).
        self._length: bytes | None = None
        self._codings: bytes | None = None
        self._received = 0
        self._until_close = False  # the final answer's body ends when the connection does
        self._ambiguous = False  # the final answer had both a length and a coding
        self.answered = False  # a byte of the answer came: the request was received
        self._head_bytes = 0  # bytes received before the final answer's headers ended
        self.closed = False
        self.closed_at = 0.0
        self.reusable = False
        self.idle_since = 0.0
        self.sent_at = 0.0

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not registered as asyncio.Transport; they are one.
        self._transport = cast("asyncio.Transport", transport)

    def data_received(self, data: bytes) -> None:
        if self._waiter is None or self._waiter.done():
            # Nothing was asked: a server talking out of turn is not one to reuse.
            self.abort()
            return
        self.answered = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            # 101 Switching Protocols: an answer (a failed attempt), on a connection that is no
            # longer HTTP.
            self._resolve()
            self.abort()
            return
        except httptools.HttpParserError as exc:
            self._fail(HttpFailure(f"invalid HTTP answer: {exc}"))
            self.abort()
            return
        if not self._status:  # still in the head (counted per read: a read is bounded)
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                self._fail(HttpFailure(f"the answer's head is over {MAX_HEAD_BYTES} bytes"))
                self.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.closed_at = time.monotonic()
        if self._waiter is None or self._waiter.done():
            return
        if not self._status:
            self._fail(HttpFailure("the connection closed before an answer"))
        elif self._until_close and exc is None:
            # An answer delimited by the end of the connection: what came is all of it.
            self._resolve()
        else:
            self._fail(HttpFailure(self._cut_short(exc)))

    def _cut_short(self, exc: Exception | None) -> str:
        """Why the answer under way is incomplete, as the connection ended (`exc`: how)."""
        how = "reset" if exc is not None else "closed"
        if self._until_close:
            return f"answer cut short: the connection was reset after {self._received} bytes"
        if self._codings is not None:
            return (
                f"answer cut short: the connection {how} before the last chunk "
                f"({self._received} bytes read)"
            )
        if self._length is not None:
            length = self._length.decode("latin-1").strip()
            return f"answer cut short: {self._received} of {length} bytes (the connection {how})"
        return f"answer cut short: the connection {how}"  # headers ended, no body expected

    # httptools callbacks

    def on_message_begin(self) -> None:
        if self._waiter is None or self._waiter.done():
            self.abort()  # a second answer to one request
            return
        # Each answer's headers are its own: a 1xx's before the final one count for nothing.
        self._retry_after, self._length, self._codings = None, None, None

    def on_header(self, name: bytes, value: bytes) -> None:
        size = len(name)  # told apart by length first: most headers are none of these
        if size == 11:
            if name.lower() == b"retry-after":
                self._retry_after = value.decode("latin-1")
        elif size == 14:
            if name.lower() == b"content-length":
                self._length = value  # llhttp refuses one that is not digits, or a second
        elif size == 17 and name.lower() == b"transfer-encoding":
            codings = self._codings
            self._codings = value if codings is None else codings + b"," + value

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        # 1xx answers (100 Continue, 103 Early Hints) come before the final one.
        if not 100 <= status < 200 or status == 101:
            self._status = status
            codings, length = self._codings, self._length
            # RFC 9112 §6.3, as llhttp reads it: no body after 204 or 304; chunks when the
            # last coding is chunked; otherwise a coding, or no length, runs to the close.
            chunked = (
                codings is not None
                and codings.rpartition(b",")[2].strip(b" \t").lower() == b"chunked"
            )
            self._until_close = (
                status not in (204, 304) and not chunked and (codings is not None or length is None)
            )
            self._ambiguous = codings is not None and length is not None

    def on_body(self, body: bytes) -> None:
        self._received += len(body)
        room = self._limit - len(self._body)
        if len(body) < room:
            self._body += body
            return
        # The limit is reached: answered now. The connection is reused only if the answer
        # ends right there; the rest of a longer one is never read.
        self._body += body[:room]
        self._resolve()
        if len(body) > room:
            self.abort()

    def on_message_complete(self) -> None:
        if not self._status:
            return  # an informational answer: the final one follows
        # Framing that two parsers could read two ways: what follows it is not trusted.
        self.reusable = (
            self._status != 101 and not self._ambiguous and self._parser.should_keep_alive()
        )
        self._resolve()

    # the exchange

    def _resolve(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(Response(self._status, self._retry_after, bytes(self._body)))

    def _fail(self, exc: BaseException) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(exc)

    def time_out(self) -> None:
        if self._waiter is None or self._waiter.done():
            return  # answered as the deadline came: the connection is fine
        self._fail(TimeoutError())
        self.abort()

    def abort(self) -> None:
        self.reusable = False
        self.closed = True
        if self._transport is not None:
            self._transport.abort()

    def closed_within(self, seconds: float) -> bool:
        """Closed by the peer no later than `seconds` after the last request went."""
        return self.closed and self.closed_at - self.sent_at <= seconds

    def send(
        self, head: bytes, body: bytes, deadline: float, loop: asyncio.AbstractEventLoop
    ) -> asyncio.Future[Response]:
        """Send one request: the future of its answer, failed with TimeoutError past
        `deadline` (`loop`'s clock). `end_exchange` follows, whatever the future gives.
        A future, not a coroutine: one layer less to suspend and resume per request."""
        assert self._transport is not None
        waiter: asyncio.Future[Response] = loop.create_future()
        self._waiter = waiter
        self._status, self._retry_after, self.answered, self.reusable = 0, None, False, False
        self._head_bytes = 0
        self._body = bytearray()
        self._received, self._until_close, self._ambiguous = 0, False, False
        self.deadline = deadline
        self._deadlines.watch(self)
        self.sent_at = time.monotonic()
        try:
            # One buffer: uvloop's `write` sends it at once (writelines queues, 0.25 µs more).
            self._transport.write(head + body)
        except BaseException:
            self.end_exchange(failed=True)
            raise
        return waiter

    def end_exchange(self, failed: bool) -> None:
        self._deadlines.forget(self)
        self._waiter = None
        if failed:
            self.abort()  # cancelled or failed midway: its state is unknown


class Deadlines:
    """Times out exchanges that pass their deadline: one check every `DEADLINE_TICK_SECONDS`
    while any is under way. One for all of a sender's pools (a pool's own would tick for
    each quiet origin with a slow answer)."""

    def __init__(self) -> None:
        self._watched: set[_Connection] = set()
        self._check: asyncio.TimerHandle | None = None

    def watch(self, connection: _Connection) -> None:
        self._watched.add(connection)
        if self._check is None:
            self._check = asyncio.get_running_loop().call_later(
                DEADLINE_TICK_SECONDS, self._time_out_late
            )

    def forget(self, connection: _Connection) -> None:
        self._watched.discard(connection)

    @property
    def watched(self) -> int:
        """Exchanges under way."""
        return len(self._watched)

    @property
    def ticking(self) -> bool:
        return self._check is not None

    def _time_out_late(self) -> None:
        self._check = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        try:
            for connection in [c for c in self._watched if c.deadline <= now]:
                self._watched.discard(connection)
                connection.time_out()
        finally:
            if self._watched:
                self._check = loop.call_later(DEADLINE_TICK_SECONDS, self._time_out_late)


class OriginPool:
    """The kept-alive connections of one origin (scheme, host, port), all to `address`."""

    def __init__(
        self,
        *,
        scheme: str,
        host: str,
        port: int,
        address: str | None,
        user_agent: str,
        connect_timeout: float,
        tls: ssl.SSLContext | None,
        max_idle: int,
        body_limit: int,
        deadlines: Deadlines | None = None,
    ) -> None:
        self._https = scheme == "https"
        self._host = host
        self._port = port
        self._address = address  # None: the name is looked up when connecting
        self._connect_timeout = connect_timeout
        self._tls = tls if self._https else None
        self._max_idle = max_idle
        self._body_limit = body_limit
        self._idle: list[_Connection] = []
        self._deadlines = deadlines or Deadlines()
        self._open = True
        # The name as DNS, SNI and `Host` carry it: an internationalised one in its ASCII form.
        try:
            self._ascii_host = host if host.isascii() else host.encode("idna").decode("ascii")
        except UnicodeError as exc:
            raise ValueError(f"the host {host!r} has no ASCII form") from exc
        literal = f"[{self._ascii_host}]" if ":" in host else self._ascii_host
        default = 443 if self._https else 80
        authority = literal if port == default else f"{literal}:{port}"
        # The request head's fixed lines, after the request line.
        self._fixed = header_lines({"host": authority, "user-agent": user_agent})

    @property
    def address(self) -> str | None:
        return self._address

    async def post(self, target: str, lines: HeaderLines, body: bytes, timeout: float) -> Response:
        """POST `body` to `target` (path and query) with the header `lines` (made by
        `header_lines`); the answer's status, `Retry-After` and at most the pool's body limit
        of its body. Raises TimeoutError past `timeout` seconds, OSError or `HttpFailure` when
        the exchange fails, ValueError for a target with a line break."""
        if "\n" in target or "\r" in target:
            raise ValueError("the target holds a line break")
        # The target is percent-encoded ASCII and names are tokens; values go as UTF-8.
        head = (
            f"POST {target} HTTP/1.1\r\n{self._fixed}{lines}content-length: {len(body)}\r\n\r\n"
        ).encode()
        # Asked once per request and passed on: each `get_running_loop` asks the kernel for
        # the process id (a system call, 0.15 µs), and a request needed three.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        connection = self._take_idle(loop.time())
        kept_alive = connection is not None
        while True:
            if connection is None:
                connection = await self._connect(deadline)
            answer = connection.send(head, body, deadline, loop)
            try:
                response = await answer
            except HttpFailure:
                # A kept-alive connection the server closed as the request went: nothing was
                # answered, so it goes once more on a new connection (as browsers and curl do).
                raced = not connection.answered and connection.closed_within(RESEND_WITHIN_SECONDS)
                connection.end_exchange(failed=True)
                if kept_alive and raced:
                    connection, kept_alive = None, False
                    continue
                raise
            except BaseException:
                connection.end_exchange(failed=True)
                raise
            connection.end_exchange(failed=False)
            return self._settle(connection, response, loop.time())

    def expire(self, now: float) -> None:
        """Close the connections idle for `IDLE_SECONDS` (the oldest are first in line)."""
        while self._idle and now - self._idle[0].idle_since >= IDLE_SECONDS:
            self._idle.pop(0).abort()

    def _take_idle(self, now: float) -> _Connection | None:
        self.expire(now)  # what stays is younger than IDLE_SECONDS
        while self._idle:
            connection = self._idle.pop()
            if not connection.closed:
                return connection
        return None

    async def _connect(self, deadline: float) -> _Connection:
        loop = asyncio.get_running_loop()
        limit = min(self._connect_timeout, deadline - loop.time())
        if limit <= 0:
            raise TimeoutError
        # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a cancellation that comes
        # as the connection completes.
        async with asyncio.timeout(limit):
            _, connection = await loop.create_connection(
                lambda: _Connection(self._body_limit, self._deadlines),
                self._address or self._ascii_host,
                self._port,
                ssl=self._tls,
                server_hostname=self._ascii_host if self._tls is not None else None,
                ssl_handshake_timeout=self._connect_timeout if self._tls is not None else None,
            )
        return connection

    def _settle(self, connection: _Connection, response: Response, now: float) -> Response:
        """Back to the pool if the answer was whole and the server keeps the connection
        (idle since `now`, the loop's clock)."""
        if (
            connection.reusable
            and not connection.closed
            and self._open
            and len(self._idle) < self._max_idle
        ):
            connection.idle_since = now
            self._idle.append(connection)
            return response
        connection.abort()
        return response

    def close(self) -> None:
        """Close the idle connections; those in use close when their exchange ends."""
        self._open = False
        idle, self._idle = self._idle, []
        for connection in idle:
            connection.abort()


def header_lines(headers: Mapping[str, str]) -> HeaderLines:
    """Headers as lines of a request head. ValueError for a line break in a name or a value:
    it would end the header there and smuggle what follows as another."""
    text = "".join([f"{name}: {value}\r\n" for name, value in headers.items()])
    if text.count("\n") != len(headers) or text.count("\r") != len(headers):
        raise ValueError("a header holds a line break")
    return HeaderLines(text)


def tls_context(root_certificates_pem: tuple[bytes, ...] = ()) -> ssl.SSLContext:
    """Certificates verified against the system's roots and `root_certificates_pem` (added to
    them, not instead); TLS 1.2 at least; HTTP/1.1 offered in ALPN, so a server that also
    speaks h2 answers in HTTP/1.1."""
    context = ssl.create_default_context()
    # Set here, not left to OpenSSL's build and configuration (which may allow 1.0).
    context.minimum_version = MIN_TLS_VERSION
    for pem in root_certificates_pem:
        # Bundles may carry comments in any encoding around their PEM blocks.
        context.load_verify_locations(cadata=pem.decode(errors="replace"))
    context.set_alpn_protocols(["http/1.1"])
    return context


@dataclass(slots=True)
class _Origin:
    pool: OriginPool
    checked_at: float


class HttpClient:
    """The engine's HTTP client: `post(url, headers, body, timeout)`. It owns the pools of
    kept-alive connections, one per endpoint origin (scheme, host, port), the least recently
    used closed past `MAX_ORIGINS`; one deadline check for all their exchanges; the sweep of
    idle connections; and, with a `guard`, the address check: a pool connects to the address
    the guard checked, so DNS cannot change between the check and the connect, and the name
    is looked up and checked again after `RECHECK_SECONDS` (a new answer gets a new pool)."""

    def __init__(
        self,
        *,
        user_agent: str,
        body_limit: int,
        guard: EndpointGuard | None,
        connect_timeout: float = 5.0,
        root_certificates_pem: tuple[bytes, ...] = (),
        pool_size_per_origin: int = 64,
    ) -> None:
        self._user_agent = user_agent
        self._limit = body_limit
        self._guard = guard
        self._connect_timeout = connect_timeout
        self._tls = tls_context(root_certificates_pem)
        self._pool_size = pool_size_per_origin
        # (scheme, host, port) -> its pool; insertion order is use order (an LRU).
        self._origins: dict[tuple[str, str, int], _Origin] = {}
        # endpoint URL -> (its origin, the request target)
        self._targets: dict[str, tuple[tuple[str, str, int], str]] = {}
        self._swept = time.monotonic()
        # One timeout check for every pool's exchanges.
        self._deadlines = Deadlines()

    def post(
        self, url: str, headers: HeaderLines, body: bytes, timeout: float
    ) -> Coroutine[Any, Any, Response]:
        """POST `body` to `url` with `headers` (`user-agent`, `host` and `content-length` are
        the client's); the answer's status, `Retry-After` and at most `body_limit` bytes of
        its body. Raises `servicekit.net.AddressRefused` for an address the guard refuses,
        TimeoutError past `timeout` seconds, OSError or `HttpFailure` when the exchange
        fails, ValueError for a URL the client cannot send to. No coroutine of its own when
        the origin's pool is ready (every request but the first to an origin, and one a
        minute): the pool's."""
        key, target = self._target(url)
        pool = self._ready_pool(key)
        if pool is not None:
            return pool.post(target, headers, body, timeout)
        return self._post_checked(url, key, target, headers, body, timeout)

    async def _post_checked(
        self,
        url: str,
        key: tuple[str, str, int],
        target: str,
        headers: HeaderLines,
        body: bytes,
        timeout: float,
    ) -> Response:
        pool = await self._checked_pool(url, key)
        return await pool.post(target, headers, body, timeout)

    async def close(self) -> None:
        origins, self._origins = list(self._origins.values()), {}
        for origin in origins:
            origin.pool.close()

    def _target(self, url: str) -> tuple[tuple[str, str, int], str]:
        known = self._targets.get(url)
        if known is None:
            parts = urlsplit(url)
            host = parts.hostname or ""
            port = parts.port or (443 if parts.scheme == "https" else 80)
            target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            # Percent-encoded as URL parsers do (UTF-8 for the rest; escapes kept as they are).
            target = quote(target, safe=_TARGET_SAFE)
            if len(self._targets) >= MAX_TARGETS:
                self._targets.clear()
            known = self._targets[url] = ((parts.scheme, host, port), target)
        return known

    def _ready_pool(self, key: tuple[str, str, int]) -> OriginPool | None:
        """The origin's pool when it has one whose address needs no check now."""
        now = time.monotonic()
        if now - self._swept >= IDLE_SECONDS:
            self._sweep(now)
        origin = self._origins.get(key)
        if origin is not None and (
            self._guard is None or now - origin.checked_at < RECHECK_SECONDS
        ):
            self._origins[key] = self._origins.pop(key)  # most recently used last
            return origin.pool
        return None

    async def _checked_pool(self, url: str, key: tuple[str, str, int]) -> OriginPool:
        """The origin's pool of kept-alive connections when `_ready_pool` has none: to the
        address checked now when guarded. Refuses (`AddressRefused`) what the guard refuses."""
        now = time.monotonic()
        address: str | None = None
        if self._guard is not None:
            checked = await resolve_checked(url, self._guard.policy, resolver=self._guard.resolver)
            address = str(checked)
        # Other requests may have checked the origin while this one waited: one pool stays,
        # and one displaced is closed (its connections would otherwise stay open, unused).
        origin = self._origins.pop(key, None)
        if origin is not None and origin.pool.address == address:
            origin.checked_at = max(origin.checked_at, now)
        else:
            if origin is not None:
                origin.pool.close()
            scheme, host, port = key
            pool = OriginPool(
                scheme=scheme,
                host=host,
                port=port,
                address=address,
                user_agent=self._user_agent,
                connect_timeout=self._connect_timeout,
                tls=self._tls,
                max_idle=self._pool_size,
                body_limit=self._limit,
                deadlines=self._deadlines,
            )
            origin = _Origin(pool, now)
        self._origins[key] = origin
        while len(self._origins) > MAX_ORIGINS:
            self._origins.pop(next(iter(self._origins))).pool.close()
        return origin.pool

    def _sweep(self, now: float) -> None:
        """Close connections idle too long in every pool, the quiet ones included."""
        self._swept = now
        loop_now = asyncio.get_running_loop().time()
        for origin in self._origins.values():
            origin.pool.expire(loop_now)
