from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator

import nats
import pytest
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig
from servicekit.events.pull import PullFailed, PullRequests, status_of

from tests.factories import pull_consumer_on, unique_event_type


@pytest.fixture
async def subject(js: JetStreamContext) -> str:
    return f"events.{unique_event_type()}"


@pytest.fixture(params=["taken from the reader", "through nats-py's callback"])
async def pulls(
    request: pytest.FixtureRequest,
    js: JetStreamContext,
    nats_client: NatsClient,
    nats_url: str,
    subject: str,
) -> AsyncIterator[PullRequests]:
    """Pull requests on a client made by `connect_nats` (the session's), and on nats-py's own
    (whose messages all come through the subscription's callback)."""
    direct = request.param == "taken from the reader"
    client = nats_client if direct else await nats.connect(nats_url)
    requests = PullRequests(
        client, "EVENTS", await pull_consumer_on(js, subject, prefix="test-pull")
    )
    await requests.start()
    yield requests
    await requests.close()
    if not direct:
        await client.close()


async def publish(js: JetStreamContext, subject: str, count: int) -> None:
    for n in range(count):
        await js.publish(subject, f"m{n}".encode())


async def answer_a_request_ended_here(
    js: JetStreamContext, nats_client: NatsClient, pulls: PullRequests, subject: str
) -> None:
    """One message held by `pulls` and not handed out: the answer to a lingering request
    that reached this side only after it stopped waiting."""
    await nats_client.publish(
        f"$JS.API.CONSUMER.MSG.NEXT.EVENTS.{pulls.durable}",
        json.dumps({"batch": 1, "expires": 5_000_000_000}).encode(),
        reply=f"{pulls.inbox}.earlier",
    )
    await nats_client.flush()
    await publish(js, subject, 1)
    await asyncio.sleep(0.3)


async def assert_a_waiting_pull_gets_the_message_published_after(
    js: JetStreamContext, pulls: PullRequests, subject: str, delay: float
) -> None:
    """A pull waiting up to 10 s returns the message published `delay` seconds into its wait,
    as it comes (not at the end of the wait)."""

    async def later() -> None:
        await asyncio.sleep(delay)
        await publish(js, subject, 1)

    publishing = asyncio.ensure_future(later())
    started = time.monotonic()
    batch = await pulls.pull(1, wait=10.0)
    await publishing
    assert [msg.data for msg in batch] == [b"m0"]
    assert time.monotonic() - started < delay + 4.0


async def test_a_pull_takes_what_the_consumer_has_up_to_its_batch_at_once(
    js: JetStreamContext, pulls: PullRequests, subject: str
) -> None:
    await publish(js, subject, 7)
    first = await pulls.pull(5)
    second = await pulls.pull(5)
    assert [msg.data for msg in first + second] == [f"m{n}".encode() for n in range(7)]
    assert [len(first), len(second)] == [5, 2]


async def test_a_pull_with_nothing_there_is_empty_without_waiting(
    pulls: PullRequests,
) -> None:
    started = time.monotonic()
    assert await pulls.pull(5) == []
    assert time.monotonic() - started < 1.0


async def test_a_waiting_pull_returns_the_first_message_as_it_comes(
    js: JetStreamContext, pulls: PullRequests, subject: str
) -> None:
    await assert_a_waiting_pull_gets_the_message_published_after(js, pulls, subject, 0.2)


async def test_a_waiting_pull_with_nothing_coming_is_empty_after_its_wait(
    pulls: PullRequests,
) -> None:
    started = time.monotonic()
    assert await pulls.pull(1, wait=0.3) == []
    assert 0.25 <= time.monotonic() - started < 0.3 + 2.0


async def test_pulled_messages_are_acknowledged_and_not_handed_out_again(
    js: JetStreamContext, pulls: PullRequests, subject: str
) -> None:
    await publish(js, subject, 3)
    for msg in await pulls.pull(5):
        await msg.ack_sync()
    assert await pulls.pull(5) == []


async def test_a_message_that_comes_after_its_request_ended_here_goes_to_the_next_pull(
    js: JetStreamContext, nats_client: NatsClient, pulls: PullRequests, subject: str
) -> None:
    await answer_a_request_ended_here(js, nats_client, pulls, subject)
    assert [msg.data for msg in await pulls.pull(5)] == [b"m0"]


async def test_a_pull_on_a_consumer_that_does_not_exist_fails_with_its_status(
    nats_client: NatsClient,
) -> None:
    missing = PullRequests(nats_client, "EVENTS", "no-such-consumer")
    await missing.start()
    try:
        with pytest.raises(PullFailed, match="503"):
            await missing.pull(5)
    finally:
        await missing.close()


def test_an_event_message_has_no_status_and_a_control_message_has_its_code() -> None:
    event = Msg(_client=None, subject="events.a.b", data=b"{}", headers={"Nats-Msg-Id": "x"})  # type: ignore[arg-type]
    ended = Msg(_client=None, subject="_INBOX.x", data=b"", headers={"Status": "408"})  # type: ignore[arg-type]
    assert status_of(event) is None
    assert status_of(ended) == "408"


def test_an_empty_event_published_with_a_status_header_is_still_an_event() -> None:
    odd = Msg(
        _client=None,  # type: ignore[arg-type]
        subject="events.a.b",
        reply="$JS.ACK.EVENTS.durable.1.1.1.1.0",
        data=b"",
        headers={"Status": "404"},
    )
    assert status_of(odd) is None


async def test_an_earlier_requests_end_does_not_end_the_current_pull(
    js: JetStreamContext, pulls: PullRequests, subject: str
) -> None:
    given_up = asyncio.ensure_future(pulls.pull(1, wait=0.5))
    await asyncio.sleep(0.1)
    given_up.cancel()
    with pytest.raises(asyncio.CancelledError):
        await given_up

    # Published after the given-up request's end (its 408 at 0.5 s).
    await assert_a_waiting_pull_gets_the_message_published_after(js, pulls, subject, 1.0)


async def test_a_pull_started_before_a_cancelled_one_unwound_is_answered_as_its_message_comes(
    js: JetStreamContext, pulls: PullRequests, subject: str
) -> None:
    given_up = asyncio.ensure_future(pulls.pull(1, wait=0.5))
    await asyncio.sleep(0.1)
    given_up.cancel()  # not awaited: it unwinds while the next pull waits
    await publish(js, subject, 1)
    started = time.monotonic()
    batch = await pulls.pull(1, wait=10.0)
    assert [msg.data for msg in batch] == [b"m0"]
    assert time.monotonic() - started < 5.0
    with pytest.raises(asyncio.CancelledError):
        await given_up


async def test_a_wait_of_zero_is_refused(pulls: PullRequests) -> None:
    with pytest.raises(ValueError, match="positive"):
        await pulls.pull(1, wait=0)


async def test_messages_a_closed_instance_held_are_returned_first_by_the_next(
    js: JetStreamContext,
    nats_client: NatsClient,
    pulls: PullRequests,
    subject: str,
) -> None:
    await answer_a_request_ended_here(js, nats_client, pulls, subject)
    kept = await pulls.close()
    successor = PullRequests(nats_client, "EVENTS", pulls.durable)
    await successor.start(kept)
    try:
        assert [msg.data for msg in await successor.pull(5)] == [b"m0"]
    finally:
        await successor.close()


async def test_a_conflict_every_request_would_meet_fails_instead_of_returning_empty(
    js: JetStreamContext, nats_client: NatsClient
) -> None:
    durable = f"test-push-{uuid.uuid4().hex[:8]}"
    await js.add_consumer(
        "EVENTS",
        config=ConsumerConfig(
            durable_name=durable,
            deliver_subject=f"push.{durable}",
            ack_policy=AckPolicy.EXPLICIT,
            filter_subject=f"events.{unique_event_type()}",
        ),
    )
    on_push_consumer = PullRequests(nats_client, "EVENTS", durable)
    await on_push_consumer.start()
    try:
        with pytest.raises(PullFailed, match="409"):
            await on_push_consumer.pull(5)
    finally:
        await on_push_consumer.close()
