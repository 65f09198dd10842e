"""`ack_all` against a real JetStream consumer: it acknowledges as `Msg.ack` does, and the
nats-py internals it reaches are the pinned version's."""

from __future__ import annotations

import asyncio
import uuid
from importlib.metadata import requires, version

import nats
import pytest
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.errors import ConnectionClosedError, NotJSMessageError, OutboundBufferLimitError
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig
from servicekit.events.acks import ack_all

from tests.factories import unique_event_type

ACK_WAIT_SECONDS = 1.0


async def delivered(js: JetStreamContext, client: NatsClient, count: int) -> tuple[str, list[Msg]]:
    """`count` messages published on a subject of their own and handed out by a durable pull
    consumer that redelivers after `ACK_WAIT_SECONDS`; its name and the messages."""
    subject = f"events.{unique_event_type()}"
    durable = f"test-acks-{uuid.uuid4().hex[:8]}"
    await js.add_consumer(
        "EVENTS",
        config=ConsumerConfig(
            durable_name=durable,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=ACK_WAIT_SECONDS,
            filter_subject=subject,
        ),
    )
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
