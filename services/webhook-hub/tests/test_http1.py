"""The engine's HTTP/1.1 client against a real local server that answers what each test
scripts, byte for byte: keep-alive and its races, answers delimited every way HTTP/1.1 allows,
answers cut short (FIN or RST), malformed and folded answers, requests that must never leave,
and the pinned parser they rely on."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from importlib.metadata import requires, version

import pytest
import uvloop
from webhook_hub.delivery_engine import http1
from webhook_hub.delivery_engine.http1 import (
    DEADLINE_TICK_SECONDS,
    Deadlines,
    HttpFailure,
    OriginPool,
    Response,
    header_lines,
)

from tests.scripted_server import (
    Reply,
    Script,
    ScriptedServer,
    ServerFactory,
    always,
    answer,
    start_scripted,
)


@pytest.fixture
async def scripted() -> AsyncIterator[ServerFactory]:
    servers: list[asyncio.Server] = []

    async def start(script: Script) -> ScriptedServer:
        state, server = await start_scripted(script)
        servers.append(server)
        return state

    yield start
    for server in servers:
        server.close()


def pool_to(
    server: ScriptedServer, *, limit: int = 4096, deadlines: Deadlines | None = None
) -> OriginPool:
    return OriginPool(
        scheme="http",
        host="receiver.test",
        port=server.port,
        address="127.0.0.1",
        user_agent="hub-test",
        connect_timeout=2.0,
        tls=None,
        max_idle=8,
        body_limit=limit,
        deadlines=deadlines,
    )


async def post(
    pool: OriginPool, headers: dict[str, str] | None = None, timeout: float = 5.0
) -> Response:
    lines = header_lines(headers or {"webhook-id": "msg_1"})
    return await pool.post("/hook?x=1", lines, b'{"a":1}', timeout)


def test_the_installed_httptools_is_the_pinned_minor_version() -> None:
    """Pinned as `httptools~=X.Y.Z`: the parser's leniencies the client relies on (and the
    answers below show) are that version's."""
    [pin] = [r.split("~=")[1] for r in requires("webhook-hub") or [] if r.startswith("httptools~=")]
    assert version("httptools").split(".")[:2] == pin.split(".")[:2]


async def test_the_request_carries_host_user_agent_length_and_the_headers_given(
    scripted: ServerFactory,
) -> None:
    server = await scripted(always(Reply(answer())))
    response = await post(pool_to(server))
    assert (response.status, response.body, response.retry_after) == (200, b"ok", None)
    assert server.requests == [
        b"POST /hook?x=1 HTTP/1.1\r\n"
        + f"host: receiver.test:{server.port}\r\n".encode()
        + b'user-agent: hub-test\r\nwebhook-id: msg_1\r\ncontent-length: 7\r\n\r\n{"a":1}'
    ]


async def test_a_kept_alive_connection_carries_the_next_requests(scripted: ServerFactory) -> None:
    server = await scripted(always(Reply(answer())))
    pool = pool_to(server)
    for _ in range(3):
        assert (await post(pool)).status == 200
    assert server.connections == 1


async def test_a_server_hanging_up_after_each_answer_costs_a_connection_not_an_attempt(
    scripted: ServerFactory,
) -> None:
    # Nothing says it will close: the client finds out from the closed connection, before
    # reusing it or as the request goes (then the request goes again, on a new connection).
    server = await scripted(always(Reply(answer(), close=True)))
    pool = pool_to(server)
    statuses = [(await post(pool)).status for _ in range(5)]
    assert statuses == [200] * 5
    assert len(server.requests) == 5
    assert server.connections == 5


async def test_a_connection_idle_too_long_is_closed_not_reused(
    scripted: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(http1, "IDLE_SECONDS", 0.0)
    server = await scripted(always(Reply(answer())))
    pool = pool_to(server)
    for _ in range(3):
        assert (await post(pool)).status == 200
    assert server.connections == 3


async def test_a_chunked_answer_is_read_and_its_connection_reused(scripted: ServerFactory) -> None:
    chunked = b"HTTP/1.1 200 X\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
    server = await scripted(always(Reply(chunked)))
    pool = pool_to(server)
    assert (await post(pool)).body == b"hello"
    assert (await post(pool)).body == b"hello"
    assert server.connections == 1


async def test_an_answer_ended_by_the_connection_closing_is_read_whole(
    scripted: ServerFactory,
) -> None:
    server = await scripted(always(Reply(b"HTTP/1.1 200 X\r\n\r\nuntil the end", close=True)))
    response = await post(pool_to(server))
    assert (response.status, response.body) == (200, b"until the end")


async def test_an_answer_longer_than_the_limit_is_cut_and_its_connection_dropped(
    scripted: ServerFactory,
) -> None:
    server = await scripted(always(Reply(answer(body=b"x" * 100))))
    pool = pool_to(server, limit=10)
    assert (await post(pool)).body == b"x" * 10
    assert (await post(pool)).body == b"x" * 10
    assert server.connections == 2


async def test_an_answer_exactly_at_the_limit_is_whole_and_keeps_its_connection(
    scripted: ServerFactory,
) -> None:
    server = await scripted(always(Reply(answer(body=b"y" * 10))))
    pool = pool_to(server, limit=10)
    assert (await post(pool)).body == b"y" * 10
    assert (await post(pool)).body == b"y" * 10
    assert server.connections == 1


async def test_retry_after_is_read_from_the_answer(scripted: ServerFactory) -> None:
    server = await scripted(always(Reply(answer(429, b"", b"Retry-After: 7\r\n"))))
    response = await post(pool_to(server))
    assert (response.status, response.retry_after) == (429, "7")


async def test_an_answer_that_is_not_http_fails_the_exchange(scripted: ServerFactory) -> None:
    server = await scripted(always(Reply(b"SSH-2.0-OpenSSH_9.2\r\n\r\n")))
    with pytest.raises(HttpFailure, match="invalid HTTP answer"):
        await post(pool_to(server))


async def test_a_new_connection_closed_without_an_answer_fails_and_is_not_sent_again(
    scripted: ServerFactory,
) -> None:
    server = await scripted(always(Reply(close=True)))
    with pytest.raises(HttpFailure, match="closed before an answer"):
        await post(pool_to(server))
    assert len(server.requests) == 1


async def test_a_request_resent_after_a_raced_close_is_not_resent_again(
    scripted: ServerFactory,
) -> None:
    # The second request meets a kept-alive connection closing, and goes once more on a new
    # connection, which closes too: that is a failed attempt, not a third try.
    server = await scripted(lambda number: Reply(answer()) if number == 1 else Reply(close=True))
    pool = pool_to(server)
    assert (await post(pool)).status == 200
    with pytest.raises(HttpFailure, match="closed before an answer"):
        await post(pool)
    assert len(server.requests) == 3
    assert server.connections == 2


async def test_a_header_with_a_line_break_is_refused_before_connecting(
    scripted: ServerFactory,
) -> None:
    server = await scripted(always(Reply(answer())))
    with pytest.raises(ValueError, match="line break"):
        await post(pool_to(server), {"x-note": "a\r\nwebhook-id: forged"})
    assert server.connections == 0


async def test_a_target_with_a_line_break_is_refused_before_anything_is_sent(
    scripted: ServerFactory,
) -> None:
    server = await scripted(always(Reply(answer())))
    with pytest.raises(ValueError, match="line break"):
        await pool_to(server).post("/hook\r\nx-forged: 1", header_lines({}), b"{}", 5.0)
    assert server.connections == 0


async def test_a_silent_server_times_out_and_its_connection_is_not_reused(
    scripted: ServerFactory,
) -> None:
    server = await scripted(lambda number: Reply(silent=True) if number == 1 else Reply(answer()))
    pool = pool_to(server)
    started = time.perf_counter()
    with pytest.raises(TimeoutError):
        await post(pool, timeout=0.5)
    assert 0.4 <= time.perf_counter() - started < 2
    assert (await post(pool)).status == 200
    assert server.connections == 2


async def test_exchanges_under_way_together_each_time_out_at_their_own_deadline(
    scripted: ServerFactory,
) -> None:
    server = await scripted(lambda number: Reply(answer()) if number == 3 else Reply(silent=True))
    pool = pool_to(server)
    started = time.perf_counter()

    async def timed_out_after(timeout: float) -> float:
        with pytest.raises(TimeoutError):
            await post(pool, timeout=timeout)
        return time.perf_counter() - started

    short = asyncio.create_task(timed_out_after(0.3))
    long = asyncio.create_task(timed_out_after(0.9))
    await asyncio.sleep(0.05)  # both are under way on connections 1 and 2
    assert (await post(pool, timeout=5.0)).status == 200
    assert 0.3 <= await short < 0.8
    assert 0.9 <= await long < 1.8


async def test_no_exchange_stays_watched_and_the_check_stops_however_exchanges_end(
    scripted: ServerFactory,
) -> None:
    replies = {1: Reply(answer()), 2: Reply(silent=True), 3: Reply(close=True)}
    server = await scripted(lambda number: replies.get(number, Reply(silent=True)))
    deadlines = Deadlines()
    pool = pool_to(server, deadlines=deadlines)
    assert (await post(pool)).status == 200  # answered
    with pytest.raises(TimeoutError):
        await post(pool, timeout=0.2)  # timed out
    with pytest.raises(HttpFailure):
        await post(pool)  # failed
    cancelled = asyncio.create_task(post(pool))
    await asyncio.sleep(0.2)
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert deadlines.watched == 0
    await asyncio.sleep(DEADLINE_TICK_SECONDS * 2)
    assert not deadlines.ticking


async def test_a_cancelled_exchange_leaves_no_connection_to_reuse(scripted: ServerFactory) -> None:
    server = await scripted(lambda number: Reply(silent=True) if number == 1 else Reply(answer()))
    pool = pool_to(server)
    task = asyncio.create_task(post(pool))
    await asyncio.wait_for(server.received.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (await post(pool)).status == 200
    assert server.connections == 2


async def test_a_closed_pool_keeps_no_connection(scripted: ServerFactory) -> None:
    server = await scripted(always(Reply(answer())))
    pool = pool_to(server)
    assert (await post(pool)).status == 200
    pool.close()
    assert (await post(pool)).status == 200  # a request still in flight finishes
    assert server.connections == 2


def test_on_uvloop_as_in_the_worker_connections_are_kept_and_answers_read() -> None:
    # The worker runs uvloop, whose transports differ from asyncio's own.
    async def exchange() -> tuple[list[int], int]:
        state, server = await start_scripted(always(Reply(answer(202))))
        try:
            pool = pool_to(state)
            return [(await post(pool)).status for _ in range(3)], state.connections
        finally:
            server.close()

    assert uvloop.run(exchange()) == ([202, 202, 202], 1)


async def test_informational_answers_before_the_final_one_are_passed_over(
    scripted: ServerFactory,
) -> None:
    early = b"HTTP/1.1 103 Early Hints\r\nlink: </style.css>\r\n\r\n"
    server = await scripted(always(Reply(early + answer(201, b"made"))))
    pool = pool_to(server)
    response = await post(pool)
    assert (response.status, response.body) == (201, b"made")
    assert (await post(pool)).status == 201
    assert server.connections == 1


async def test_an_answer_whose_headers_never_end_fails_past_64_kib(
    scripted: ServerFactory,
) -> None:
    endless = b"HTTP/1.1 200 OK\r\nx-filler: " + b"a" * (http1.MAX_HEAD_BYTES + 1)
    server = await scripted(always(Reply(endless)))
    with pytest.raises(HttpFailure, match="head is over"):
        await post(pool_to(server))


async def test_a_length_beside_chunked_framing_and_bare_line_feeds_are_read_as_browsers_do(
    scripted: ServerFactory,
) -> None:
    both = (
        b"HTTP/1.1 200 OK\r\ncontent-length: 99\r\ntransfer-encoding: chunked\r\n\r\n"
        b"2\r\nok\r\n0\r\n\r\n"
    )
    bare_lf = b"HTTP/1.1 202 Accepted\ncontent-length: 2\n\nok"
    for reply in (both, bare_lf):
        server = await scripted(always(Reply(reply)))
        response = await post(pool_to(server))
        assert (response.status, response.body) == ((200, b"ok") if reply is both else (202, b"ok"))


async def test_a_switching_protocols_answer_is_an_answer_and_its_connection_is_dropped(
    scripted: ServerFactory,
) -> None:
    upgrade = (
        b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: upgrade\r\n\r\n"
    )
    server = await scripted(lambda number: Reply(upgrade) if number == 1 else Reply(answer()))
    pool = pool_to(server)
    assert (await post(pool)).status == 101
    assert (await post(pool)).status == 200
    assert server.connections == 2


async def test_an_answer_stalling_right_at_the_limit_is_answered_not_timed_out(
    scripted: ServerFactory,
) -> None:
    # 10 bytes of a promised 20, then nothing: the limit is 10, so that is all there is to read.
    stalled = b"HTTP/1.1 200 OK\r\ncontent-length: 20\r\n\r\n" + b"z" * 10
    server = await scripted(lambda number: Reply(stalled) if number == 1 else Reply(answer()))
    pool = pool_to(server, limit=10)
    started = time.perf_counter()
    response = await post(pool, timeout=3.0)
    assert (response.status, response.body) == (200, b"z" * 10)
    assert time.perf_counter() - started < 1.5
    assert (await post(pool)).status == 200  # not on the unfinished connection
    assert server.connections == 2


async def test_a_request_the_server_held_before_hanging_up_is_not_sent_twice(
    scripted: ServerFactory,
) -> None:
    # The first request is answered on a kept-alive connection; the second is read, then the
    # receiver dies half a second later: it may have acted on it, so it is a failed attempt.
    server = await scripted(
        lambda number: Reply(answer()) if number == 1 else Reply(close=True, pause=0.5)
    )
    pool = pool_to(server)
    assert (await post(pool)).status == 200
    with pytest.raises(HttpFailure, match="closed before an answer"):
        await post(pool)
    assert len(server.requests) == 2


async def test_expiring_closes_connections_idle_too_long(
    scripted: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = await scripted(always(Reply(answer())))
    pool = pool_to(server)
    assert [r.status for r in await asyncio.gather(*(post(pool) for _ in range(3)))] == [200] * 3
    assert (server.connections, server.open) == (3, 3)
    monkeypatch.setattr(http1, "IDLE_SECONDS", 0.1)
    await asyncio.sleep(0.2)
    pool.expire(asyncio.get_running_loop().time())
    await asyncio.sleep(0.2)
    assert server.open == 0


# Answers cut short: as curl concludes (error 18, "transfer closed with N bytes remaining";
# 56 for a reset), an answer whose framing promised more than came is a failure, whether the
# receiver closes (FIN) or resets (RST) the connection.


async def test_an_answer_closed_before_its_content_length_is_cut_short(
    scripted: ServerFactory,
) -> None:
    short = b"HTTP/1.1 200 OK\r\ncontent-length: 1000000\r\n\r\nok"
    server = await scripted(always(Reply(short, close=True)))
    with pytest.raises(HttpFailure, match=r"answer cut short: 2 of 1000000 bytes"):
        await post(pool_to(server))


async def test_an_answer_reset_before_its_content_length_is_cut_short(
    scripted: ServerFactory,
) -> None:
    short = b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nok"
    server = await scripted(always(Reply(short, reset=True)))
    with pytest.raises(HttpFailure, match=r"answer cut short: 2 of 100 bytes"):
        await post(pool_to(server))


async def test_a_chunked_answer_reset_before_its_last_chunk_is_cut_short(
    scripted: ServerFactory,
) -> None:
    partial = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n7\r\npartial\r\n"
    server = await scripted(always(Reply(partial, reset=True)))
    with pytest.raises(HttpFailure, match=r"answer cut short: .*last chunk"):
        await post(pool_to(server))


async def test_a_chunked_answer_closed_before_its_last_chunk_is_cut_short(
    scripted: ServerFactory,
) -> None:
    partial = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n7\r\npartial\r\n"
    server = await scripted(always(Reply(partial, close=True)))
    with pytest.raises(HttpFailure, match=r"answer cut short: .*last chunk"):
        await post(pool_to(server))


async def test_a_chunk_of_an_absurd_size_closed_early_is_cut_short(
    scripted: ServerFactory,
) -> None:
    absurd = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nffffffffffffffff\r\nabc"
    server = await scripted(always(Reply(absurd, close=True)))
    with pytest.raises(HttpFailure, match=r"answer cut short"):
        await post(pool_to(server))


async def test_an_answer_without_length_ended_by_a_reset_is_cut_short(
    scripted: ServerFactory,
) -> None:
    # Delimited by the end of the connection, it ends at a FIN; a reset may have lost its end.
    server = await scripted(always(Reply(b"HTTP/1.1 200 X\r\n\r\nuntil the end", reset=True)))
    with pytest.raises(HttpFailure, match=r"answer cut short: the connection was reset"):
        await post(pool_to(server))


async def test_a_folded_header_line_is_read_as_one_value(scripted: ServerFactory) -> None:
    # RFC 9112 §5.2: a client replaces each obs-fold with a space and reads on.
    folded = answer(429, b"", b"x-a: a\r\n b\r\nretry-after:\r\n 7\r\n")
    server = await scripted(always(Reply(folded)))
    response = await post(pool_to(server))
    assert (response.status, response.retry_after) == (429, "7")


async def test_retry_after_on_an_informational_answer_is_not_the_final_answers(
    scripted: ServerFactory,
) -> None:
    early = b"HTTP/1.1 103 Early Hints\r\nretry-after: 86400\r\n\r\n"
    server = await scripted(always(Reply(early + answer(429, b""))))
    response = await post(pool_to(server))
    assert (response.status, response.retry_after) == (429, None)


async def test_an_answer_with_both_a_length_and_chunked_framing_leaves_its_connection_unused(
    scripted: ServerFactory,
) -> None:
    both = (
        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ntransfer-encoding: chunked\r\n\r\n"
        b"2\r\nok\r\n0\r\n\r\n"
    )
    server = await scripted(always(Reply(both)))
    pool = pool_to(server)
    assert (await post(pool)).body == b"ok"
    assert (await post(pool)).body == b"ok"
    assert server.connections == 2


async def test_the_client_posts_to_a_url_over_its_origins_kept_alive_pool(
    scripted: ServerFactory,
) -> None:
    server = await scripted(always(Reply(answer())))
    client = http1.HttpClient(user_agent="hub-test", body_limit=4096, guard=None)
    url = f"http://127.0.0.1:{server.port}/hook?x=1"
    try:
        for _ in range(3):
            response = await client.post(url, header_lines({"webhook-id": "msg_1"}), b"{}", 5.0)
            assert response.status == 200
    finally:
        await client.close()
    assert server.connections == 1
    assert server.requests[0].startswith(b"POST /hook?x=1 HTTP/1.1\r\n")


async def test_the_client_keeps_at_most_max_origins_pools_closing_the_least_recently_used(
    scripted: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(http1, "MAX_ORIGINS", 1)
    first, second = await scripted(always(Reply(answer()))), await scripted(always(Reply(answer())))
    client = http1.HttpClient(user_agent="hub-test", body_limit=4096, guard=None)
    lines = header_lines({"webhook-id": "msg_1"})
    try:
        await client.post(f"http://127.0.0.1:{first.port}/", lines, b"{}", 5.0)
        await client.post(f"http://127.0.0.1:{second.port}/", lines, b"{}", 5.0)
        await client.post(f"http://127.0.0.1:{first.port}/", lines, b"{}", 5.0)
    finally:
        await client.close()
    assert (first.connections, second.connections) == (2, 1)
