"""The sender against real local servers: TLS verification, IPv6, no redirects, a bounded
read of the answer, timeouts, and the connection made to the address the guard checked."""

from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
import os
import socket
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from servicekit.signing import sign_webhook
from servicekit.testing.app import serve_app
from servicekit.testing.resolver import ScriptedResolver
from sqlalchemy.ext.asyncio import AsyncEngine
from standardwebhooks import Webhook
from webhook_hub.app import create_app
from webhook_hub.delivery_engine.decisions import Outcome, outcome_of
from webhook_hub.delivery_engine.endpoint_policy import EndpointGuard
from webhook_hub.delivery_engine.http1 import tls_context
from webhook_hub.delivery_engine.jobs import Failure
from webhook_hub.delivery_engine.sender import WebhookSender
from webhook_hub.settings import Settings
from webhook_hub.wire_format import message_id_for, render_body, signed_at
from webhook_hub.worker import delivery_sender

from tests.factories import make_consumer, subscription_body
from tests.job_factories import make_job
from tests.scripted_server import Reply, always, answer, start_scripted

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
LIMIT = 4096


@pytest.fixture
async def serve() -> AsyncIterator[Callable[..., Awaitable[int]]]:
    """Starts `handler` on a loopback address (any port, or the one given); returns the port."""
    runners: list[web.AppRunner] = []

    async def start(
        handler: Handler, host: str = "127.0.0.1", port: int = 0, tls: ssl.SSLContext | None = None
    ) -> int:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handler)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        runners.append(runner)
        await web.TCPSite(runner, host, port, ssl_context=tls).start()
        return int(runner.addresses[0][1])

    yield start
    for runner in runners:
        await runner.cleanup()


def sender(guard: EndpointGuard | None = None, roots: tuple[bytes, ...] = ()) -> WebhookSender:
    return WebhookSender(
        user_agent="test", response_body_limit=LIMIT, guard=guard, root_certificates_pem=roots
    )


async def ok(request: web.Request) -> web.Response:
    await request.read()
    return web.Response(text="ok")


@pytest.fixture
def self_signed(tmp_path: Path) -> tuple[ssl.SSLContext, bytes]:
    """A server context with a self-signed certificate for 127.0.0.1, and its PEM."""
    return self_signed_in(tmp_path)


def self_signed_in(directory: Path, name: str = "127.0.0.1") -> tuple[ssl.SSLContext, bytes]:
    """A server context with a new self-signed certificate for 127.0.0.1 (named `name`), and
    its PEM (both files written in `directory`)."""
    directory.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    pem = cert.public_bytes(serialization.Encoding.PEM)
    (directory / "cert.pem").write_bytes(pem)
    (directory / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(directory / "cert.pem", directory / "key.pem")
    return context, pem


async def test_https_to_a_certificate_the_sender_trusts_is_delivered(
    serve: Callable[..., Awaitable[int]], self_signed: tuple[ssl.SSLContext, bytes]
) -> None:
    context, pem = self_signed
    port = await serve(ok, tls=context)
    result = await sender(roots=(pem,)).attempt(make_job(endpoint_url=f"https://127.0.0.1:{port}/"))
    assert (result.status_code, result.error) == (200, None)


async def test_https_to_an_untrusted_certificate_is_refused(
    serve: Callable[..., Awaitable[int]], self_signed: tuple[ssl.SSLContext, bytes]
) -> None:
    context, _ = self_signed
    port = await serve(ok, tls=context)
    result = await sender().attempt(make_job(endpoint_url=f"https://127.0.0.1:{port}/"))
    assert result.status_code is None
    assert outcome_of(result.status_code, result.failure) is Outcome.UNREACHABLE
    assert result.error is not None


def test_the_client_never_negotiates_tls_below_1_2() -> None:
    assert tls_context().minimum_version is ssl.TLSVersion.TLSv1_2


def worker_settings(ca_file: Path | None) -> Settings:
    return Settings(ssrf_protection=False, delivery_ca_file=str(ca_file or ""))


async def test_the_workers_sender_trusts_the_certificates_of_the_ca_file_setting(
    serve: Callable[..., Awaitable[int]],
    self_signed: tuple[ssl.SSLContext, bytes],
    tmp_path: Path,
) -> None:
    context, pem = self_signed
    port = await serve(ok, tls=context)
    (tmp_path / "private-ca.pem").write_bytes(pem)
    job = make_job(endpoint_url=f"https://127.0.0.1:{port}/")
    trusting = delivery_sender(worker_settings(tmp_path / "private-ca.pem"))
    assert (await trusting.attempt(job)).status_code == 200
    assert (await delivery_sender(worker_settings(None)).attempt(job)).status_code is None


async def test_the_ca_file_adds_to_the_systems_roots_and_replaces_none(
    serve: Callable[..., Awaitable[int]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SSL_CERT_FILE stands for the system's roots: OpenSSL reads its default roots there.
    public_context, public_pem = self_signed_in(tmp_path / "public", "public receiver")
    private_context, private_pem = self_signed_in(tmp_path / "private", "private receiver")
    (tmp_path / "system.pem").write_bytes(public_pem)
    (tmp_path / "private-ca.pem").write_bytes(private_pem)
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "system.pem"))
    sender = delivery_sender(worker_settings(tmp_path / "private-ca.pem"))
    for context in (public_context, private_context):
        port = await serve(ok, tls=context)
        result = await sender.attempt(make_job(endpoint_url=f"https://127.0.0.1:{port}/"))
        assert (result.status_code, result.error) == (200, None)


def test_a_ca_file_without_a_certificate_stops_the_worker_from_starting(tmp_path: Path) -> None:
    (tmp_path / "empty.pem").write_text("# no certificate here\n")
    with pytest.raises(ssl.SSLError):
        delivery_sender(worker_settings(tmp_path / "empty.pem"))


async def test_an_ipv6_loopback_endpoint_is_delivered(
    serve: Callable[..., Awaitable[int]],
) -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    port = await serve(ok, host="::1")
    guard = EndpointGuard(["::1/128"])
    result = await sender(guard).attempt(make_job(endpoint_url=f"http://[::1]:{port}/hook"))
    assert (result.status_code, result.response_body) == (200, "ok")


async def test_a_redirect_is_answered_not_followed(serve: Callable[..., Awaitable[int]]) -> None:
    followed: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        if request.path == "/elsewhere":
            followed.append(request.path)
            return web.Response(text="followed")
        raise web.HTTPFound("/elsewhere")

    port = await serve(handle)
    result = await sender().attempt(make_job(endpoint_url=f"http://127.0.0.1:{port}/hook"))
    assert result.status_code == 302
    assert outcome_of(result.status_code, result.failure) is Outcome.REJECTED
    assert followed == []


async def test_a_100_mb_answer_is_read_only_to_4_kib(serve: Callable[..., Awaitable[int]]) -> None:
    written = 0

    async def huge(request: web.Request) -> web.StreamResponse:
        nonlocal written
        response = web.StreamResponse()
        response.content_length = 100 * 1024 * 1024
        await response.prepare(request)
        chunk = b"x" * 65536
        try:
            for _ in range(100 * 16):
                await response.write(chunk)
                written += len(chunk)
        except (ConnectionError, OSError):
            pass  # the sender hung up: what it never read was never sent
        return response

    port = await serve(huge)
    started = time.perf_counter()
    result = await sender().attempt(make_job(endpoint_url=f"http://127.0.0.1:{port}/big"))
    assert result.status_code == 200
    assert result.response_body == "x" * LIMIT
    await asyncio.sleep(0.5)  # the server notices the closed connection
    assert written < 20 * 1024 * 1024
    assert time.perf_counter() - started < 5


async def test_a_server_that_never_answers_times_out() -> None:
    silent = socket.create_server(("127.0.0.1", 0))  # accepts (backlog), never answers
    try:
        port = silent.getsockname()[1]
        started = time.perf_counter()
        job = make_job(endpoint_url=f"http://127.0.0.1:{port}/", timeout_seconds=1)
        result = await sender().attempt(job)
    finally:
        silent.close()
    assert result.failure is Failure.TIMEOUT
    assert outcome_of(result.status_code, result.failure) is Outcome.TIMED_OUT
    assert 0.9 <= time.perf_counter() - started < 3


@pytest.fixture
async def two_receivers(
    serve: Callable[..., Awaitable[int]],
) -> tuple[int, list[str], list[str]]:
    """One port on 127.0.0.1 (the public address the guard allows) and 127.0.0.2 (standing for
    an internal one), each counting what reaches it."""
    public: list[str] = []
    internal: list[str] = []

    def counting(hits: list[str]) -> Handler:
        async def handle(request: web.Request) -> web.Response:
            hits.append(request.host)
            return web.Response(text="ok")

        return handle

    port = await serve(counting(public))
    await serve(counting(internal), host="127.0.0.2", port=port)
    return port, public, internal


async def test_a_dns_answer_changing_after_the_check_does_not_move_the_connection(
    two_receivers: tuple[int, list[str], list[str]],
) -> None:
    port, public, internal = two_receivers
    resolver = ScriptedResolver(["127.0.0.1", "127.0.0.2"])
    guarded = sender(EndpointGuard(["127.0.0.1/32"], resolver=resolver))
    for _ in range(3):
        result = await guarded.attempt(make_job(endpoint_url=f"http://rebind.test:{port}/hook"))
        assert result.status_code == 200
    # Checked once; the client never looks the name up itself (it would not resolve).
    assert resolver.lookups == ["rebind.test"]
    assert public == [f"rebind.test:{port}"] * 3
    assert internal == []


async def test_a_name_answering_a_refused_address_is_refused_without_a_connection(
    two_receivers: tuple[int, list[str], list[str]],
) -> None:
    port, public, internal = two_receivers
    guarded = sender(EndpointGuard(["127.0.0.1/32"], resolver=ScriptedResolver(["127.0.0.2"])))
    result = await guarded.attempt(make_job(endpoint_url=f"http://rebind.test:{port}/hook"))
    assert result.failure is Failure.REFUSED
    assert (result.error or "").startswith("refused")
    assert public == internal == []


async def test_after_the_recheck_a_new_answer_is_checked_again(
    two_receivers: tuple[int, list[str], list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    port, public, internal = two_receivers
    resolver = ScriptedResolver(["127.0.0.1", "127.0.0.2"])
    guarded = sender(EndpointGuard(["127.0.0.1/32"], resolver=resolver))
    url = f"http://rebind.test:{port}/hook"
    assert (await guarded.attempt(make_job(endpoint_url=url))).status_code == 200
    monkeypatch.setattr("webhook_hub.delivery_engine.http1.RECHECK_SECONDS", 0.0)
    result = await guarded.attempt(make_job(endpoint_url=url))
    assert result.failure is Failure.REFUSED
    assert len(public) == 1
    assert internal == []


async def test_the_signature_and_webhook_id_reach_the_receiver(
    serve: Callable[..., Awaitable[int]],
) -> None:
    seen: list[dict[str, str]] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append({name.lower(): value for name, value in request.headers.items()})
        return web.Response(status=204)

    port = await serve(handle)
    job = make_job(endpoint_url=f"http://127.0.0.1:{port}/")
    result = await sender().attempt(job)
    assert result.status_code == 204
    assert seen[0]["webhook-id"] == job.message_id
    assert seen[0]["webhook-signature"].startswith("v1,")
    assert seen[0]["user-agent"] == "test"


async def test_what_the_receiver_gets_is_what_as_sent_rebuilds_from_the_wire_format(
    serve: Callable[..., Awaitable[int]],
) -> None:
    # The sender copies `message_id_for`, `signed_at` and the rendered body for speed; the
    # portal's "as sent" calls them: this holds the copies equal.
    seen: list[tuple[dict[str, str], bytes]] = []

    async def handle(request: web.Request) -> web.Response:
        headers = {name.lower(): value for name, value in request.headers.items()}
        seen.append((headers, await request.read()))
        return web.Response(status=204)

    port = await serve(handle)
    job = make_job(endpoint_url=f"http://127.0.0.1:{port}/")
    result = await sender().attempt(job)
    headers, body = seen[0]
    message_id = message_id_for(job.delivery_id)
    timestamp = signed_at(result.attempted_at)
    assert body == render_body(job.event_type, job.event_time, job.payload_json)
    assert headers["webhook-id"] == message_id
    assert headers["webhook-timestamp"] == str(timestamp)
    assert headers["webhook-signature"] == sign_webhook(message_id, timestamp, body, job.secrets)


def test_a_jobs_webhook_id_is_message_id_for_its_delivery() -> None:
    job = make_job()
    assert job.message_id == message_id_for(job.delivery_id)


async def test_the_subscriptions_headers_go_first_and_its_trace_headers_give_way_to_the_deliverys(
    serve: Callable[..., Awaitable[int]],
) -> None:
    seen: list[tuple[list[tuple[str, str]], bytes]] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append(([(n.lower(), v) for n, v in request.headers.items()], await request.read()))
        return web.Response(status=204)

    port = await serve(handle)
    job = make_job(endpoint_url=f"http://127.0.0.1:{port}/")
    job.headers = {"X-Team": "blue", "Traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}
    ours = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"
    job.traceparent, job.tracestate = ours, "hub=1"
    result = await sender().attempt(job)
    assert (result.status_code, result.error) == (204, None)
    headers, body = seen[0]
    names = [name for name, _ in headers]
    assert names[names.index("x-team") : names.index("x-team") + 5] == [
        "x-team",
        "content-type",
        "webhook-id",
        "webhook-timestamp",
        "webhook-signature",
    ]
    # The delivery's context (or, when this process traces, its attempt span's), once.
    traceparents = [value for name, value in headers if name == "traceparent"]
    assert len(traceparents) == 1
    assert traceparents[0].split("-")[1] == "a" * 32
    Webhook(job.secrets[0]).verify(body, dict(headers))


async def test_a_secret_that_cannot_sign_is_a_failed_attempt_and_nothing_is_sent(
    serve: Callable[..., Awaitable[int]],
) -> None:
    requests: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        requests.append(request.path)
        return web.Response(status=204)

    port = await serve(handle)
    job = make_job(endpoint_url=f"http://127.0.0.1:{port}/")
    job.secrets = ["not base64!"]
    result = await sender().attempt(job)
    assert result.status_code is None
    assert result.failure is Failure.NETWORK
    assert result.error == "SignatureError: webhook secret is not base64"
    assert requests == []


async def test_attempts_to_one_endpoint_reuse_a_kept_alive_connection(
    serve: Callable[..., Awaitable[int]],
) -> None:
    peers: list[object] = []

    async def handle(request: web.Request) -> web.Response:
        assert request.transport is not None
        peers.append(request.transport.get_extra_info("peername"))
        return web.Response(text="ok")

    port = await serve(handle)
    one = sender()
    for _ in range(3):
        result = await one.attempt(make_job(endpoint_url=f"http://127.0.0.1:{port}/hook"))
        assert result.status_code == 200
    assert len(peers) == 3
    assert len(set(peers)) == 1  # one connection, from one client port


async def test_concurrent_checks_of_one_name_leave_one_pool_and_nothing_open() -> None:
    state, server = await start_scripted(always(Reply(answer())))
    try:
        guarded = sender(EndpointGuard(["127.0.0.1/32"], resolver=ScriptedResolver(["127.0.0.1"])))
        url = f"http://receiver.test:{state.port}/hook"
        results = await asyncio.gather(
            *(guarded.attempt(make_job(endpoint_url=url)) for _ in range(20))
        )
        assert [r.status_code for r in results] == [200] * 20
        # Every connection is back in the one pool kept: the next attempts reuse them.
        opened = state.connections
        for _ in range(5):
            assert (await guarded.attempt(make_job(endpoint_url=url))).status_code == 200
        assert state.connections == opened
        await guarded.close()
        await asyncio.sleep(0.2)
        assert state.open == 0
    finally:
        server.close()


async def test_a_quiet_origins_idle_connections_are_closed_by_the_next_attempt_elsewhere(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    quiet, quiet_server = await start_scripted(always(Reply(answer())))
    busy, busy_server = await start_scripted(always(Reply(answer())))
    try:
        one = sender()
        assert (
            await one.attempt(make_job(endpoint_url=f"http://127.0.0.1:{quiet.port}/"))
        ).status_code == 200
        assert quiet.open == 1
        monkeypatch.setattr("webhook_hub.delivery_engine.http1.IDLE_SECONDS", 0.1)
        await asyncio.sleep(0.2)
        assert (
            await one.attempt(make_job(endpoint_url=f"http://127.0.0.1:{busy.port}/"))
        ).status_code == 200
        await asyncio.sleep(0.2)
        assert quiet.open == 0
    finally:
        quiet_server.close()
        busy_server.close()


async def test_a_path_query_and_header_beyond_ascii_reach_the_receiver_encoded(
    serve: Callable[..., Awaitable[int]],
) -> None:
    seen: list[tuple[str, str]] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append((request.raw_path, request.headers["x-team"]))
        return web.Response(status=204)

    port = await serve(handle)
    job = make_job(endpoint_url=f"http://127.0.0.1:{port}/hooks/café?q=日本&ok=a%20b")
    job.headers = {"x-team": "équipe 日本"}
    result = await sender().attempt(job)
    assert (result.status_code, result.error) == (204, None)
    assert seen == [("/hooks/caf%C3%A9?q=%E6%97%A5%E6%9C%AC&ok=a%20b", "équipe 日本")]


# Any bytes a receiver answers with: the status line, the headers (framing ones often, with
# values of every kind, folded or not), the body (chunked or not, whole or cut), ended by a
# FIN or a reset. `FUZZ_RANDOM` set: new inputs each run (as `make fuzz`).
_STATUS_LINES = st.one_of(
    st.builds(
        lambda version, code, reason: b"HTTP/%s %d %s" % (version, code, reason),
        st.sampled_from([b"1.1", b"1.0", b"2", b"0.9", b"1.1x"]),
        st.integers(0, 1200),
        st.binary(max_size=12),
    ),
    st.binary(max_size=40),
)
_NAMES = st.one_of(
    st.sampled_from(
        [b"content-length", b"Transfer-Encoding", b"retry-after", b"connection", b"x-a"]
    ),
    st.binary(max_size=12),
)
_VALUES = st.one_of(
    st.sampled_from(
        [
            *(b"chunked", b"gzip, chunked", b"chunked, gzip", b"0", b"5", b"1000000", b"-1"),
            *(b"ffffffffffffffff", b"close", b"\xc2\xb2", b"Wed, 21 Oct 2015 07:28:00 -0000"),
        ]
    ),
    st.binary(max_size=30),
)
_LINE_ENDS = st.sampled_from([b"\r\n", b"\n", b"\r", b"\r\n ", b""])
_CHUNKED = st.builds(
    lambda chunks, last: b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + last,
    st.lists(st.binary(max_size=20), max_size=4),
    st.sampled_from([b"0\r\n\r\n", b"", b"ffffffffffffffff\r\nabc", b"zz\r\n"]),
)
_HEADS = st.builds(
    lambda status, end, headers: (
        status
        + end
        + b"".join(name + b":" + value + line_end for name, value, line_end in headers)
        + end
    ),
    _STATUS_LINES,
    _LINE_ENDS,
    st.lists(st.tuples(_NAMES, _VALUES, _LINE_ENDS), max_size=6),
)
_ANSWERS = st.builds(
    lambda early, head, body: early + head + body,
    st.sampled_from([b"", b"HTTP/1.1 103 Early Hints\r\nretry-after: 9\r\n\r\n"]),
    _HEADS,
    st.one_of(st.binary(max_size=300), _CHUNKED),
)


@settings(
    max_examples=150,
    deadline=None,
    database=None,
    derandomize=not os.environ.get("FUZZ_RANDOM"),
    suppress_health_check=[HealthCheck.too_slow],
)
@given(answer_bytes=_ANSWERS, reset=st.booleans())
async def test_any_bytes_answered_give_an_answer_or_a_failure_never_an_exception(
    answer_bytes: bytes, reset: bool
) -> None:
    state, server = await start_scripted(always(Reply(answer_bytes, close=not reset, reset=reset)))
    client = sender()
    try:
        result = await client.attempt(
            make_job(endpoint_url=f"http://127.0.0.1:{state.port}/", timeout_seconds=5)
        )
    finally:
        await client.close()
        server.close()
    # The receiver hung up: the client concludes from that, never waits for its timeout.
    assert result.failure in (None, Failure.NETWORK)
    assert (result.status_code is None) == (result.failure is not None)
    if result.status_code is not None:
        assert result.response_body is not None
        assert "\x00" not in result.response_body


@settings(
    max_examples=100,
    deadline=None,
    database=None,
    derandomize=not os.environ.get("FUZZ_RANDOM"),
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    length=st.integers(0, 300),
    cut=st.integers(0, 400),
    chunked=st.booleans(),
    reset=st.booleans(),
)
async def test_a_success_means_the_whole_framed_answer_came(
    length: int, cut: int, chunked: bool, reset: bool
) -> None:
    # The answer's framing promises `length` bytes; the receiver hangs up after `cut` bytes
    # of its body as sent (chunk sizes and line ends included when chunked).
    body = b"x" * length
    if chunked:
        head = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
        framed = (b"%x\r\n%s\r\n" % (length, body) if body else b"") + b"0\r\n\r\n"
    else:
        head, framed = b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % length, body
    state, server = await start_scripted(
        always(Reply(head + framed[:cut], close=not reset, reset=reset))
    )
    client = sender()
    try:
        result = await client.attempt(make_job(endpoint_url=f"http://127.0.0.1:{state.port}/"))
    finally:
        await client.close()
        server.close()
    if cut >= len(framed):
        assert (result.status_code, result.response_body) == (200, body.decode())
    else:
        assert (result.status_code, result.failure) == (None, Failure.NETWORK)
        assert result.error is not None
        assert "answer cut short" in result.error


async def test_the_creation_probe_trusts_the_ca_file_as_deliveries_do(
    serve: Callable[..., Awaitable[int]],
    self_signed: tuple[ssl.SSLContext, bytes],
    tmp_path: Path,
    service_settings: Settings,
    db_engine: AsyncEngine,
) -> None:
    context, pem = self_signed
    port = await serve(ok, tls=context)
    (tmp_path / "private-ca.pem").write_bytes(pem)
    trusting = service_settings.model_copy(
        update={"delivery_ca_file": str(tmp_path / "private-ca.pem")}
    )
    consumer = await make_consumer(db_engine, "write")
    async with serve_app(create_app(trusting)) as client:
        response = await client.post(
            "/webhooks/subscriptions",
            json=subscription_body(f"https://127.0.0.1:{port}/hooks"),
            headers=consumer.headers,
        )
    assert response.json()["probe"] == {"reachable": True, "status_code": 200, "error": None}
