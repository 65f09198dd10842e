"""The one module that reaches nats-py's internals: acknowledging many JetStream messages
at once, and handing a subscription's messages over as they are read.

nats-py is pinned to 2.16 (`~=`) for them; `tests/test_nats_adapter.py` exercises each on a
real server and fails on another minor version. What is reached:

- `ack_all`: `Msg._client`, `Msg._check_reply`, `Msg._ackd`, and the client's
  `_send_command`, `_flush_pending`, `_flush_queue`, `_pending_data_size` and
  `_max_pending_size`.
- `connect_nats` and `take_directly`: the client's protocol parser (`Client._ps`, a
  `nats.protocol.parser.Parser`), its `_subs`, `_process_msg` and `stats`, and
  `Client._parse_header_lines`.

**Acknowledgements.** `Msg.ack` publishes an empty message to the message's reply subject,
through five coroutines and their checks: 3 to 5 µs a message, which the delivery engine
paid for every event it recorded (it and `EventConsumer` acknowledge through `ack_all`).
`ack_all` writes the same protocol lines (`PUB <reply subject> 0`), joined, into the
client's outgoing buffer once, and asks its flusher to send them, as `publish` does. Reply
subjects are JetStream's own, so they are not validated again as `publish` would.

**Messages handed over.** nats-py reads each message with two regular expressions, parses
its headers (whether anyone reads them or not), builds it through keyword arguments and
queues it for the subscription's task, which awaits the callback: 13.7 to 17.3 µs of CPU per
message pulled and acknowledged in batches of 500, against 6.8 to 8.4 when handed over here
(60,000 messages with a `Nats-Msg-Id` header, three rounds). A client made by
`connect_nats` reads `MSG`/`HMSG` lines itself; a message of a subscription registered with
`take_directly` that carries a reply subject (a JetStream message) is given to the
subscription's function at once, as a `DirectMsg` whose headers are parsed when first read.
Everything else (status and control messages, other subscriptions, every other operation)
goes through nats-py as before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import structlog
from nats import errors
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.errors import ProtocolError
from nats.protocol.parser import AWAITING_CONTROL_LINE, AWAITING_MSG_PAYLOAD, Parser

logger = structlog.get_logger(__name__)

# A message's header block starts with this line (a space after it would be a status).
_HEADER_LINE = b"NATS/1.0"


async def ack_all(msgs: Sequence[Msg]) -> None:
    """Acknowledge the messages of `msgs` not acknowledged yet (what `await msg.ack()` does
    for each). A message that is not JetStream's raises `NotJSMessageError` before anything
    is sent; the connection's state raises as `publish` would."""
    by_client: dict[int, tuple[NatsClient, list[Msg]]] = {}
    for msg in msgs:
        if msg.is_acked:
            continue  # acknowledged is acknowledged: the others still are
        msg._check_reply()
        client: NatsClient = msg._client
        by_client.setdefault(id(client), (client, []))[1].append(msg)
    for client, theirs in by_client.values():
        await _send_acks(client, theirs)


async def _send_acks(client: NatsClient, msgs: list[Msg]) -> None:
    if client.is_closed:
        raise errors.ConnectionClosedError
    if client.is_draining_pubs:
        raise errors.ConnectionDrainingError
    # An acknowledgement is an empty message to the reply subject, with no reply of its own.
    data = b"".join([f"PUB {msg.reply}  0\r\n\r\n".encode() for msg in msgs])
    if not client.is_connected and (
        client._max_pending_size <= 0 or client._pending_data_size > client._max_pending_size
    ):
        # Reconnecting with its buffer full (or buffering off): `publish` refuses so too (an
        # acknowledgement's payload is empty, so only what is buffered already counts).
        raise errors.OutboundBufferLimitError
    await client._send_command(data)
    client.stats["out_msgs"] += len(msgs)
    for msg in msgs:
        msg._ackd = True
    if client._flush_queue is not None and client._flush_queue.empty():
        await client._flush_pending()


# --- messages handed over as they are read -------------------------------------------------

Take = Callable[[Msg], None]


class DirectMsg(Msg):
    """A message handed over by `take_directly`: a `Msg` whose headers are parsed when first
    read (the dispatch path never reads them; parsing cost nats-py 4 µs a message).

    Everything a `Msg` does works (ack, nak, term, in_progress, metadata, respond,
    `ack_all`). It differs in that its headers are always read by nats-py's line parser
    (nats-py uses `fast_mail_parser` when that is installed), the client's `msg_class` is
    not used, and `dataclasses.replace` does not apply (its constructor is not Msg's)."""

    def __init__(
        self,
        client: NatsClient,
        subject: str,
        reply: str,
        data: bytes,
        raw_headers: bytes,
        sid: int,
    ) -> None:
        # Msg's fields, set directly: its generated __init__ takes them as keywords, slower.
        self._client = client
        self.subject = subject
        self.reply = reply
        self.data = data
        self._raw_headers = raw_headers
        self._headers: dict[str, str] | None = None
        self._metadata = None
        self._ackd = False
        self._sid = sid

    @property
    def headers(self) -> dict[str, str] | None:
        if self._raw_headers:
            raw, self._raw_headers = self._raw_headers, b""
            # As nats-py reads a block without a status: the lines after `NATS/1.0`.
            self._headers = NatsClient._parse_header_lines(raw[len(_HEADER_LINE) + 2 :]) or None
        return self._headers

    @headers.setter
    def headers(self, value: dict[str, str] | None) -> None:
        self._raw_headers = b""
        self._headers = value


class _DirectParser(Parser):
    """nats-py's parser, reading `MSG` and `HMSG` itself and handing the messages of the
    subscriptions in `takers` over at once; every other line is nats-py's to read."""

    def __init__(self, client: NatsClient) -> None:
        super().__init__(client)
        self.takers: dict[int, Take] = {}

    async def parse(self, data: bytes = b"") -> None:
        buf = self.buf
        buf += data
        pos = 0  # what is read of `buf`: removed once, at the end
        try:
            while pos < len(buf):
                if self.state == AWAITING_CONTROL_LINE:
                    end = buf.find(b"\r\n", pos)
                    if end < 0:
                        return  # the rest of the line is still to come
                    is_message = buf.startswith(b"MSG ", pos) or buf.startswith(b"HMSG ", pos)
                    if not (is_message and self._message_line(bytes(buf[pos:end]))):
                        # Another operation, or a message line that is not one: nats-py's.
                        pos = await self._other(buf, pos, end)
                        if pos < 0:
                            return  # the connection was reset meanwhile
                        continue
                    pos = end + 2
                    self.state = AWAITING_MSG_PAYLOAD
                needed = self.needed
                if len(buf) - pos < needed + 2:
                    return  # the rest of the payload is still to come
                header_size = self.header_needed
                headers = bytes(buf[pos : pos + header_size]) if header_size else b""
                payload = bytes(buf[pos + header_size : pos + needed])
                pos += needed + 2
                self.state = AWAITING_CONTROL_LINE
                self.header_needed = 0
                arg = self.msg_arg
                if not self._hand_over(arg["sid"], arg["subject"], arg["reply"], payload, headers):
                    nc: Any = self.nc
                    await nc._process_msg(
                        arg["sid"], arg["subject"], arg["reply"], payload, headers or None
                    )
                    if buf is not self.buf:
                        return  # the connection was reset meanwhile
        finally:
            if buf is self.buf:
                del buf[:pos]

    def _message_line(self, line: bytes) -> bool:
        """Read `MSG <subject> <sid> [reply] <size>` or `HMSG <subject> <sid> [reply]
        <header size> <size>` into the parser's state; False if it is not one."""
        fields = line.split()
        if fields[0] == b"MSG" and len(fields) in (4, 5):
            sizes = [b"0", fields[-1]]
        elif fields[0] == b"HMSG" and len(fields) in (5, 6):
            sizes = fields[-2:]
        else:
            return False
        if not (fields[2].isdigit() and sizes[0].isdigit() and sizes[1].isdigit()):
            return False
        with_reply = len(fields) == (5 if fields[0] == b"MSG" else 6)
        reply = fields[3] if with_reply else b""
        self.msg_arg = {"subject": fields[1], "sid": int(fields[2]), "reply": reply}
        self.header_needed = int(sizes[0])
        self.needed = int(sizes[1])
        return True

    def _hand_over(
        self, sid: int, subject: bytes, reply: bytes, payload: bytes, headers: bytes
    ) -> bool:
        """Give a JetStream message (one with a reply subject and no status) of a registered
        subscription to its taker; False if it is nats-py's to process."""
        take = self.takers.get(sid)
        if take is None or not reply or headers[len(_HEADER_LINE) : len(_HEADER_LINE) + 1] == b" ":
            return False
        nc: Any = self.nc
        subscription = nc._subs.get(sid)
        if subscription is None or subscription._max_msgs > 0:
            return False  # unsubscribed meanwhile, or counted: nats-py's rules
        nc.stats["in_msgs"] += 1
        nc.stats["in_bytes"] += len(payload)
        subscription._received += 1  # as nats-py counts (`Subscription.delivered`)
        try:
            take(DirectMsg(nc, subject.decode(), reply.decode(), payload, headers, sid))
        except Exception:
            # Raised here, it would end nats-py's read loop, and with it the connection's
            # reading. The message is not acknowledged: JetStream hands it out again.
            logger.exception(
                "a subscription's taker failed", subject=subject.decode(errors="replace")
            )
        return True

    async def _other(self, buf: bytearray, pos: int, end: int) -> int:
        """Let nats-py's parser read the one line at `pos` (PING, PONG, INFO, +OK, -ERR, or
        one that is not understood); where reading goes on, or -1 after a reset."""
        line = bytearray(buf[pos : end + 2])
        self.buf = line
        try:
            await Parser.parse(self)
        finally:
            # Reset meanwhile (a reconnect): the parser's new buffer stays, the old is void.
            reset = self.buf is not line
            if not reset:
                self.buf = buf
        if reset:
            return -1
        if line:
            raise ProtocolError("nats: unknown protocol")  # a line nats-py would wait on
        return end + 2


async def connect_nats(**options: Any) -> NatsClient:
    """`nats.connect(**options)`, with a client whose subscriptions can be handed their
    messages directly (`take_directly`)."""
    client = NatsClient()
    client._ps = _DirectParser(client)
    await client.connect(**options)
    return client


def take_directly(client: NatsClient, subscription: Subscription, take: Take) -> bool:
    """Hand the JetStream messages of `subscription` to `take` as they are read (status
    messages still go to its callback). False, and nothing changes, if `client` was not made
    by `connect_nats`, or if the subscription is one nats-py does more for than queue its
    messages: a JetStream push or ordered consumer's (flow control, heartbeats, sequence
    checks) or a request's."""
    parser = client._ps
    if not isinstance(parser, _DirectParser):
        return False
    if subscription._jsi is not None or subscription._future is not None:
        return False
    parser.takers[subscription._id] = take
    return True


def stop_taking(client: NatsClient, subscription: Subscription) -> None:
    """The messages of `subscription` go to its callback again."""
    parser = client._ps
    if isinstance(parser, _DirectParser):
        parser.takers.pop(subscription._id, None)
