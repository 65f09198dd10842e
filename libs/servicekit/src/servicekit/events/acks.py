"""Acknowledging many JetStream messages at once.

`Msg.ack` publishes an empty message to the message's reply subject, through five coroutines
and their checks: 3 to 5 µs a message, which the delivery engine paid for every event it
recorded (it and `EventConsumer` acknowledge through this now). `ack_all` writes the same protocol lines (`PUB <reply subject> 0`), joined, into
the client's outgoing buffer once, and asks its flusher to send them, as `publish` does.
Reply subjects are JetStream's own, so they are not validated again as `publish` would.

The one place that reaches nats-py's internals: `Msg._client`, `Msg._check_reply`,
`Msg._ackd`, and the client's `_send_command`, `_flush_pending`, `_flush_queue`,
`_pending_data_size` and `_max_pending_size`. nats-py is pinned to 2.16 for them;
`tests/test_acks.py` acknowledges through them on a real server, and fails on another minor
version.
"""

from __future__ import annotations

from collections.abc import Sequence

from nats import errors
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg


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
