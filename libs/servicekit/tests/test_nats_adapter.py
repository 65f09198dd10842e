"""servicekit's adapter of nats-py's internals: `ack_all` acknowledges as `Msg.ack` does,
against a real JetStream consumer; the reader of `connect_nats` reads the protocol as
nats-py's parser does, in whatever pieces it comes, and hands registered subscriptions their
JetStream messages directly; the internals reached are the pinned version's."""

from __future__ import annotations

import asyncio
import contextlib
from importlib.metadata import requires, version
from typing import Any

import nats
import pytest
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.errors import (
    ConnectionClosedError,
    NotJSMessageError,
    OutboundBufferLimitError,
    ProtocolError,
)
from nats.js import JetStreamContext
from nats.protocol.parser import AWAITING_CONTROL_LINE, Parser
from servicekit.embedded.nats import EmbeddedNats
from servicekit.events.nats_adapter import (
    DirectMsg,
    _DirectParser,
    ack_all,
    connect_nats,
    take_directly,
)
from servicekit.events.pull import PullRequests
from servicekit.events.stream import ensure_events_stream
from servicekit.settings import ServiceSettings

from tests.factories import pull_consumer_on, unique_event_type

ACK_WAIT_SECONDS = 1.0


async def delivered(js: JetStreamContext, client: NatsClient, count: int) -> tuple[str, list[Msg]]:
    """`count` messages published on a subject of their own and handed out by a durable pull
    consumer that redelivers after `ACK_WAIT_SECONDS`; its name and the messages."""
    subject = f"events.{unique_event_type()}"
    durable = await pull_consumer_on(js, subject, ack_wait=ACK_WAIT_SECONDS, prefix="test-acks")
    for n in range(count):
        await js.publish(subject, f"m{n}".encode())
    subscription = await client.jetstream().pull_subscribe_bind(durable, stream="EVENTS")
    return durable, await subscription.fetch(count, timeout=5)


async def settled(js: JetStreamContext, durable: str) -> tuple[int, int]:
    """The consumer's messages awaiting acknowledgement and redelivered, once the ack wait
    has passed."""
    await asyncio.sleep(ACK_WAIT_SECONDS * 1.5)
    info = await js.consumer_info("EVENTS", durable)
    return info.num_ack_pending, info.num_redelivered


def test_the_installed_nats_py_is_the_pinned_minor_version() -> None:
    """Pinned as `nats-py~=X.Y.Z`: the internals `ack_all` reaches are that version's."""
    [pin] = [r.split("~=")[1] for r in requires("servicekit") or [] if r.startswith("nats-py~=")]
    assert version("nats-py").split(".")[:2] == pin.split(".")[:2]


async def test_every_message_is_acknowledged_and_none_comes_back(
    js: JetStreamContext, nats_client: NatsClient
) -> None:
    durable, msgs = await delivered(js, nats_client, 5)
    await ack_all(msgs)
    assert all(msg.is_acked for msg in msgs)
    assert await settled(js, durable) == (0, 0)


async def test_a_message_acknowledged_before_is_left_alone_and_the_others_are_acknowledged(
    js: JetStreamContext, nats_client: NatsClient
) -> None:
    durable, msgs = await delivered(js, nats_client, 3)
    await msgs[1].ack()
    sent = nats_client.stats["out_msgs"]
    await ack_all(msgs)
    assert nats_client.stats["out_msgs"] == sent + 2
    assert all(msg.is_acked for msg in msgs)
    assert await settled(js, durable) == (0, 0)


async def test_while_reconnecting_without_a_buffer_it_refuses_as_publishing_does(
    js: JetStreamContext, nats_client: NatsClient, nats_url: str
) -> None:
    client = await nats.connect(nats_url, pending_size=0)
    try:
        _, msgs = await delivered(js, client, 1)
        client._status = NatsClient.RECONNECTING  # as the client marks a dropped connection
        with pytest.raises(OutboundBufferLimitError):
            await client.publish("events.elsewhere", b"")
        with pytest.raises(OutboundBufferLimitError):
            await ack_all(msgs)
        assert not msgs[0].is_acked
    finally:
        client._status = NatsClient.CONNECTED
        await client.close()


async def test_a_message_that_is_not_jetstreams_is_refused(nats_client: NatsClient) -> None:
    with pytest.raises(NotJSMessageError):
        await ack_all([Msg(nats_client, subject="events.plain", reply="")])


async def test_a_closed_connection_refuses_as_publishing_does(
    js: JetStreamContext, nats_client: NatsClient, nats_url: str
) -> None:
    client = await nats.connect(nats_url)
    _, msgs = await delivered(js, client, 1)
    await client.close()
    with pytest.raises(ConnectionClosedError):
        await ack_all(msgs)


async def test_nothing_to_acknowledge_sends_nothing(nats_client: NatsClient) -> None:
    before = nats_client.stats["out_msgs"]
    await ack_all([])
    assert nats_client.stats["out_msgs"] == before


# --- the reader ---------------------------------------------------------------------------


def msg_line(subject: str, sid: int, reply: str, payload: bytes) -> bytes:
    reply_part = f" {reply}" if reply else ""
    return f"MSG {subject} {sid}{reply_part} {len(payload)}\r\n".encode() + payload + b"\r\n"


def hmsg_line(subject: str, sid: int, reply: str, headers: bytes, payload: bytes) -> bytes:
    reply_part = f" {reply}" if reply else ""
    sizes = f"{len(headers)} {len(headers) + len(payload)}"
    return f"HMSG {subject} {sid}{reply_part} {sizes}\r\n".encode() + headers + payload + b"\r\n"


ACK_SUBJECT = "$JS.ACK.EVENTS.d.1.7.7.1732680000000000000.0"
# Every operation a server sends, and messages of every shape: with and without a reply or
# headers, empty, with a payload that looks like a protocol line, JetStream's status
# messages (no reply) and a flow control request (a reply and a status).
STREAM = b"".join(
    [
        b'INFO {"server_id":"s","max_payload":1048576}\r\n',
        b"PING\r\n",
        msg_line("events.a", 1, "", b"plain"),
        b"PONG\r\n",
        b"+OK\r\n",
        msg_line("events.a", 2, ACK_SUBJECT, b'{"id":"1"}'),
        msg_line("events.a", 2, ACK_SUBJECT, b""),
        msg_line("events.a", 2, ACK_SUBJECT, b"MSG events.a 2 5\r\nhello"),
        hmsg_line("events.b", 2, ACK_SUBJECT, b"NATS/1.0\r\nNats-Msg-Id: e1\r\n\r\n", b"{}"),
        hmsg_line("_INBOX.x.1", 2, "", b"NATS/1.0 404 No Messages\r\n\r\n", b""),
        hmsg_line("_INBOX.x.1", 2, "", b"NATS/1.0 100 Idle Heartbeat\r\n\r\n", b""),
        hmsg_line("events.b", 2, "$JS.FC.x", b"NATS/1.0 100 FlowControl Request\r\n\r\n", b""),
        hmsg_line("events.c", 3, ACK_SUBJECT, b"NATS/1.0\r\nA: 1\r\n\r\n", b"x" * 3000),
        b"-ERR 'Stale Connection'\r\n",
        msg_line("events.a", 2, ACK_SUBJECT, b"last"),
    ]
)


class Recorder:
    """What a parser asks of its client (nats-py's parser calls these five)."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self._subs = {sid: Subscribed() for sid in (1, 2, 3)}
        self.stats = {"in_msgs": 0, "in_bytes": 0}

    async def _process_msg(
        self, sid: int, subject: bytes, reply: bytes, data: bytes, headers: bytes | None
    ) -> None:
        self.calls.append(("msg", sid, bytes(subject), bytes(reply), data, headers))

    async def _process_ping(self) -> None:
        self.calls.append(("ping",))

    async def _process_pong(self) -> None:
        self.calls.append(("pong",))

    async def _process_info(self, info: dict[str, Any]) -> None:
        self.calls.append(("info", info))

    async def _process_err(self, error: str) -> None:
        self.calls.append(("err", error))


class Subscribed:
    _max_msgs = 0
    _received = 0


class ResettingRecorder(Recorder):
    """A client that resets its parser on an error, as nats-py's does when it reconnects,
    and on the message of `reset_on_sid`."""

    def __init__(self, reset_on_sid: int | None = None) -> None:
        super().__init__()
        self.parser: Parser | None = None
        self.reset_on_sid = reset_on_sid

    async def _process_err(self, error: str) -> None:
        await super()._process_err(error)
        assert self.parser is not None
        self.parser.reset()

    async def _process_msg(
        self, sid: int, subject: bytes, reply: bytes, data: bytes, headers: bytes | None
    ) -> None:
        await super()._process_msg(sid, subject, reply, data, headers)
        if sid == self.reset_on_sid:
            assert self.parser is not None
            self.parser.reset()


async def read_in_pieces(parser: Parser, data: bytes, cuts: list[int]) -> None:
    for start, end in zip([0, *cuts], [*cuts, len(data)], strict=True):
        await parser.parse(data[start:end])


async def calls_of(parser_class: type[Parser], cuts: list[int]) -> list[tuple[Any, ...]]:
    recorder = Recorder()
    await read_in_pieces(parser_class(recorder), STREAM, cuts)
    return recorder.calls


async def test_the_reader_reads_the_protocol_as_nats_pys_parser_does_cut_anywhere() -> None:
    expected = await calls_of(Parser, [])
    assert [call[0] for call in expected].count("msg") == 10  # the stream was read in full
    for cut in range(1, len(STREAM)):
        assert await calls_of(_DirectParser, [cut]) == expected, f"cut at byte {cut}"


async def test_the_reader_reads_the_protocol_byte_by_byte_as_nats_pys_parser_does() -> None:
    assert await calls_of(_DirectParser, list(range(1, len(STREAM)))) == await calls_of(Parser, [])


async def taken_and_left(cuts: list[int]) -> tuple[list[Msg], Recorder]:
    recorder = Recorder()
    parser = _DirectParser(recorder)  # type: ignore[arg-type]
    taken: list[Msg] = []
    parser.takers[2] = taken.append
    await read_in_pieces(parser, STREAM, cuts)
    return taken, recorder


async def test_what_is_taken_and_what_is_left_is_the_same_wherever_the_reads_are_cut() -> None:
    taken, recorder = await taken_and_left([])
    for cut in range(1, len(STREAM)):
        taken_cut, recorder_cut = await taken_and_left([cut])
        assert [(m.subject, m.reply, m.data, m.headers) for m in taken_cut] == [
            (m.subject, m.reply, m.data, m.headers) for m in taken
        ], f"cut at byte {cut}"
        assert recorder_cut.calls == recorder.calls, f"cut at byte {cut}"


async def test_a_registered_subscription_takes_its_jetstream_messages_and_nothing_else() -> None:
    taken, recorder = await taken_and_left([100, 101, 400])
    assert [(m.subject, m.reply, m.data) for m in taken] == [
        ("events.a", ACK_SUBJECT, b'{"id":"1"}'),
        ("events.a", ACK_SUBJECT, b""),
        ("events.a", ACK_SUBJECT, b"MSG events.a 2 5\r\nhello"),
        ("events.b", ACK_SUBJECT, b"{}"),
        ("events.a", ACK_SUBJECT, b"last"),
    ]
    assert all(isinstance(m, DirectMsg) for m in taken)
    assert taken[3].headers == {"Nats-Msg-Id": "e1"}
    assert taken[0].headers is None
    # Statuses (no reply), flow control (a reply and a status), other subscriptions: nats-py's.
    left = [(call[1], call[2]) for call in recorder.calls if call[0] == "msg"]
    assert left == [
        (1, b"events.a"),
        (2, b"_INBOX.x.1"),
        (2, b"_INBOX.x.1"),
        (2, b"events.b"),
        (3, b"events.c"),
    ]
    assert recorder.stats == {"in_msgs": 5, "in_bytes": sum(len(m.data) for m in taken)}
    assert recorder._subs[2]._received == 5


async def test_messages_of_a_subscription_gone_or_counted_are_left_to_nats_py() -> None:
    for subscriptions in ({1: Subscribed(), 3: Subscribed()}, {2: Counted()}):
        recorder = Recorder()
        recorder._subs = subscriptions  # type: ignore[assignment]
        parser = _DirectParser(recorder)  # type: ignore[arg-type]
        taken: list[Msg] = []
        parser.takers[2] = taken.append
        await parser.parse(STREAM)
        assert taken == []
        assert [call[0] for call in recorder.calls].count("msg") == 10


class Counted(Subscribed):
    """Subscribed with a message limit (`unsubscribe(limit=...)`): nats-py counts down."""

    _max_msgs = 100


async def test_after_a_reset_on_an_error_the_rest_of_that_read_is_dropped_and_reading_goes_on() -> (
    None
):
    recorder = ResettingRecorder()
    parser = recorder.parser = _DirectParser(recorder)  # type: ignore[arg-type]
    await parser.parse(STREAM)
    assert recorder.calls[-1][0] == "err"  # the message after it was not read
    assert (parser.buf, parser.state) == (bytearray(), AWAITING_CONTROL_LINE)
    await parser.parse(msg_line("events.a", 1, "", b"again"))
    assert recorder.calls[-1] == ("msg", 1, b"events.a", b"", b"again", None)


async def test_after_a_reset_while_a_message_is_processed_the_rest_of_that_read_is_dropped() -> (
    None
):
    recorder = ResettingRecorder(reset_on_sid=3)
    parser = recorder.parser = _DirectParser(recorder)  # type: ignore[arg-type]
    await parser.parse(STREAM)
    assert recorder.calls[-1][:2] == ("msg", 3)
    assert (parser.buf, parser.state) == (bytearray(), AWAITING_CONTROL_LINE)
    await parser.parse(b"PING\r\n")
    assert recorder.calls[-1] == ("ping",)


async def test_a_client_not_made_by_connect_nats_keeps_nats_pys_delivery(nats_url: str) -> None:
    client = await nats.connect(nats_url)
    try:
        subscription = await client.subscribe("events.nowhere")
        assert take_directly(client, subscription, lambda msg: None) is False
    finally:
        await client.close()


async def test_a_jetstream_push_subscription_keeps_nats_pys_delivery(
    js: JetStreamContext, nats_client: NatsClient
) -> None:
    subject = f"events.{unique_event_type()}"
    subscription = await nats_client.jetstream().subscribe(subject, ordered_consumer=True)
    try:
        # The client's subscription under JetStream's wrapper.
        assert take_directly(nats_client, subscription._sub, lambda msg: None) is False
    finally:
        await subscription.unsubscribe()


async def test_a_taker_that_fails_loses_that_message_and_the_reading_goes_on() -> None:
    recorder = Recorder()
    parser = _DirectParser(recorder)  # type: ignore[arg-type]
    taken: list[bytes] = []

    def take(msg: Msg) -> None:
        if msg.data == b"":
            raise RuntimeError("a bug in the taker")
        taken.append(msg.data)

    parser.takers[2] = take
    await parser.parse(STREAM)
    assert taken == [b'{"id":"1"}', b"MSG events.a 2 5\r\nhello", b"{}", b"last"]
    assert ("msg", 3) in [call[:2] for call in recorder.calls]  # read to the end


async def test_a_line_that_is_no_operation_is_a_protocol_error_as_in_nats_py() -> None:
    for line in (b"HELLO there\r\n", b"MSG events.a x 5\r\nhello\r\n"):
        for parser_class in (Parser, _DirectParser):
            with pytest.raises(ProtocolError):
                await parser_class(Recorder()).parse(line)  # type: ignore[arg-type]


def test_a_direct_messages_headers_are_read_once_and_can_be_set() -> None:
    msg = DirectMsg(
        None,  # type: ignore[arg-type]
        "events.a",
        ACK_SUBJECT,
        b"{}",
        b"NATS/1.0\r\nNats-Msg-Id: e1\r\ntraceparent: 00-ab-cd-01\r\n\r\n",
        2,
    )
    assert msg.headers == {"Nats-Msg-Id": "e1", "traceparent": "00-ab-cd-01"}
    assert msg.headers is msg.headers
    msg.headers = {"a": "b"}
    assert msg.header == {"a": "b"}
    assert msg.metadata.sequence.stream == 7


async def test_pulled_messages_come_straight_from_the_reader_with_their_headers(
    js: JetStreamContext, nats_client: NatsClient
) -> None:
    """The session's client is made by `connect_nats`."""
    subject = f"events.{unique_event_type()}"
    durable = await pull_consumer_on(js, subject, prefix="test-direct")
    for n in range(3):
        await js.publish(subject, f"m{n}".encode(), headers={"Nats-Msg-Id": f"{durable}-{n}"})
    pulls = PullRequests(nats_client, "EVENTS", durable)
    await pulls.start()
    msgs = await pulls.pull(10)
    assert [type(m) for m in msgs] == [DirectMsg] * 3
    assert [m.data for m in msgs] == [b"m0", b"m1", b"m2"]
    assert [m.headers for m in msgs] == [{"Nats-Msg-Id": f"{durable}-{n}"} for n in range(3)]
    assert [m.metadata.sequence.consumer for m in msgs] == [1, 2, 3]
    await ack_all(msgs)
    assert await pulls.pull(10) == []
    await pulls.close()
    info = await js.consumer_info("EVENTS", durable)
    assert (info.num_ack_pending, info.num_pending) == (0, 0)


async def test_a_client_that_reconnected_still_hands_pulled_messages_over(
    restartable_nats: EmbeddedNats, kit_settings: ServiceSettings
) -> None:
    client = await connect_nats(
        servers=[restartable_nats.url], max_reconnect_attempts=-1, reconnect_time_wait=0.2
    )
    try:
        js = client.jetstream()
        await ensure_events_stream(js, kit_settings)
        subject = f"events.{unique_event_type()}"
        durable = await pull_consumer_on(js, subject, prefix="test-reconnecting")
        pulls = PullRequests(client, "EVENTS", durable)
        await pulls.start()
        await js.publish(subject, b"before")
        assert [m.data for m in await pulls.pull(5)] == [b"before"]
        restartable_nats.stop()
        restartable_nats.start()
        for _ in range(30):  # until the client is back and JetStream answers
            with contextlib.suppress(nats.errors.Error, TimeoutError):
                await js.publish(subject, b"after", timeout=1.0)
                break
        after = await pulls.pull(5, wait=5.0)
        assert [(type(m), m.data) for m in after] == [(DirectMsg, b"after")]
        await pulls.close()
    finally:
        await client.close()
