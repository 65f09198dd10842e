"""JetStream pull requests, made directly: a request on the consumer's `MSG.NEXT` subject, the
messages gathered as they are read (`nats_adapter.take_directly`, on a client made by
`connect_nats`; by the subscription's callback otherwise) and handed over together.

nats-py's `fetch` takes each message of a batch with `next_msg(timeout)`: a task, a
`wait_for` and a timer per message, a fixed cost that dispatch paid for every event. This
uses only nats-py's public client (inbox, subscribe with a callback, publish with a reply
subject) and JetStream's documented pull protocol:
https://docs.nats.io/reference/reference-protocols/nats_api_reference (`CONSUMER.MSG.NEXT`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg

from servicekit.events.nats_adapter import stop_taking, take_directly

# Status lines JetStream ends a pull request with, or sends within one.
NO_MESSAGES = "404"  # a no-wait request found nothing more
REQUEST_TIMEOUT = "408"  # the request's `expires` passed before its batch filled
CONFLICT = "409"  # the request was dropped (too many waiting, leadership change, ...)
CONTROL = "100"  # idle heartbeat or flow control: not an answer
ENDS_QUIETLY = frozenset({NO_MESSAGES, REQUEST_TIMEOUT, CONFLICT})
# 409s that every request would get again: a setting or the consumer is wrong, so they are
# errors (a loop would otherwise spin on empty answers without a word).
CONFLICTS_THAT_FAIL = ("Exceeded MaxRequest", "Consumer Deleted", "Consumer is push based")
# A request the server does not end (the connection dropped meanwhile) ends here this much
# after it should have.
GRACE_SECONDS = 2.0


class PullFailed(Exception):
    """JetStream answered a pull request with an error status (e.g. 503: no such consumer)."""


def status_of(msg: Msg) -> str | None:
    """The status line's code of a JetStream control message; None for an event's message
    (which carries the reply subject its acknowledgement goes to; a status never does)."""
    headers = msg.headers
    if not headers or msg.data or msg.reply:
        return None
    return headers.get("Status")


class PullRequests:
    """Pull requests on one durable consumer, one at a time.

    Each request has a reply subject of its own under one inbox, so a status that ends an
    earlier request (one given up here first) cannot end the current one. A message that
    comes after its request ended here is kept for the next request, which returns it at
    once: nothing handed out waits for the ack wait.
    """

    def __init__(self, client: NatsClient, stream: str, durable: str) -> None:
        self._client = client
        self.durable = durable
        self._subject = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}"
        self._inbox = ""
        self._subscription: Any = None
        self._gathered: list[Msg] = []
        self._wanted = 0
        self._requests = 0
        self._reply = ""  # the open request's reply subject
        self._answered: asyncio.Future[str | None] | None = None

    @property
    def inbox(self) -> str:
        """The subject under which this side's requests are answered (`<inbox>.<n>`)."""
        return self._inbox

    async def start(self, kept: list[Msg] | None = None) -> None:
        """Subscribe; `kept`: messages an earlier instance held, returned first."""
        self._gathered = list(kept or [])
        self._inbox = self._client.new_inbox()
        self._subscription = await self._client.subscribe(f"{self._inbox}.*", cb=self._receive)
        # On a client made by `connect_nats`, events come straight from the reader; status
        # messages (and every message on another client) through `_receive`.
        take_directly(self._client, self._subscription, self._gather)

    async def close(self) -> list[Msg]:
        """Unsubscribe; returns the messages held and not handed out yet (unacknowledged:
        give them to the next instance, or JetStream hands them out again after the ack
        wait)."""
        kept, self._gathered = self._gathered, []
        if self._subscription is not None:
            subscription, self._subscription = self._subscription, None
            stop_taking(self._client, subscription)
            with contextlib.suppress(Exception):  # the connection it was made on may be gone
                await subscription.unsubscribe()
        return kept

    def _gather(self, msg: Msg) -> None:
        """An event's message."""
        self._gathered.append(msg)
        if len(self._gathered) >= self._wanted:
            self._end(None)

    async def _receive(self, msg: Msg) -> None:
        status = status_of(msg)
        if status is None:
            self._gather(msg)
            return
        if status == CONTROL or msg.subject != self._reply:
            return  # a heartbeat, or the end of a request given up here already
        # nats-py reads a status line without a description into the next header's line.
        description = (msg.headers or {}).get("Description", "").split("\n", 1)[0]
        if status in ENDS_QUIETLY and not description.startswith(CONFLICTS_THAT_FAIL):
            self._end(None)
        else:
            self._end(f"{status} {description}".strip())

    def _end(self, problem: str | None) -> None:
        if self._answered is not None and not self._answered.done():
            self._answered.set_result(problem)

    async def pull(self, batch: int, wait: float | None = None) -> list[Msg]:
        """Up to `batch` messages. Without `wait`, what the consumer has now (none: an empty
        list at once); with it, the request stays open up to `wait` seconds until the first
        message comes (meant for a batch of one: JetStream holds a lingering request until
        the batch is full)."""
        if self._subscription is None:
            raise RuntimeError("start() the pull requests first")
        if self._answered is not None and not self._answered.done():
            raise RuntimeError("one pull at a time")
        if wait is not None and wait <= 0:
            # `expires: 0` would be a request that never expires on the server.
            raise ValueError("wait must be positive (or None: no wait)")
        if self._gathered:
            return self._take(batch)
        request: dict[str, Any] = {"batch": batch}
        if wait is None:
            request["no_wait"] = True
        else:
            request["expires"] = int(wait * 1e9)
        self._requests += 1
        self._reply = f"{self._inbox}.{self._requests}"
        self._wanted = batch
        answered = self._answered = asyncio.get_running_loop().create_future()
        try:
            await self._client.publish(
                self._subject, json.dumps(request).encode(), reply=self._reply
            )
            try:
                async with asyncio.timeout((wait or 0.0) + GRACE_SECONDS):
                    problem = await answered
            except TimeoutError:
                problem = None  # the connection dropped meanwhile: nothing came
        finally:
            # Unless a pull started since (this one was cancelled and not yet unwound).
            if self._answered is answered:
                self._answered = None
                self._wanted = 0
                self._reply = ""
        if problem is not None and not self._gathered:
            raise PullFailed(problem)
        return self._take(batch)

    def _take(self, batch: int) -> list[Msg]:
        taken, self._gathered = self._gathered[:batch], self._gathered[batch:]
        return taken
