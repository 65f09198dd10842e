"""JetStream pull requests, made directly: a request on the consumer's `MSG.NEXT` subject, the
messages gathered by one subscription callback and handed over together.

nats-py's `fetch` takes each message of a batch with `next_msg(timeout)`: a task, a
`wait_for` and a timer per message, a fixed cost that dispatch paid for every event. This
uses only nats-py's public client (inbox, subscribe with a callback, publish with a reply
subject) and JetStream's documented pull protocol:
https://docs.nats.io/reference/reference-protocols/nats_api_reference (`CONSUMER.MSG.NEXT`).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg

# Status lines JetStream ends a pull request with, or sends within one.
NO_MESSAGES = "404"  # a no-wait request found nothing more
REQUEST_TIMEOUT = "408"  # the request's `expires` passed before its batch filled
CONFLICT = "409"  # the request was dropped (too many waiting, consumer changed, ...)
CONTROL = "100"  # idle heartbeat or flow control: not an answer
ENDS_QUIETLY = frozenset({NO_MESSAGES, REQUEST_TIMEOUT, CONFLICT})
# A request the server does not end (the connection dropped meanwhile) ends here this much
# after it should have.
GRACE_SECONDS = 2.0


class PullFailed(Exception):
    """JetStream answered a pull request with an error status (e.g. 503: no such consumer)."""


def status_of(msg: Msg) -> str | None:
    """The status line's code of a JetStream control message; None for an event's message."""
    headers = msg.headers
    if not headers or msg.data:
        return None
    return headers.get("Status")


class PullRequests:
    """Pull requests on one durable consumer, one at a time.

    A message that comes after its request ended here (the server's end was slower than
    ours) is kept for the next request, which returns it at once: nothing handed out is
    dropped on the floor to wait for the ack wait.
    """

    def __init__(self, client: NatsClient, stream: str, durable: str) -> None:
        self._client = client
        self.durable = durable
        self._subject = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}"
        self._inbox = ""
        self._subscription: Any = None
        self._gathered: list[Msg] = []
        self._wanted = 0
        self._answered: asyncio.Future[str | None] | None = None

    @property
    def inbox(self) -> str:
        """The subject this side's requests are answered on."""
        return self._inbox

    async def start(self) -> None:
        self._inbox = self._client.new_inbox()
        self._subscription = await self._client.subscribe(self._inbox, cb=self._receive)

    async def close(self) -> None:
        if self._subscription is not None:
            subscription, self._subscription = self._subscription, None
            await subscription.unsubscribe()

    async def _receive(self, msg: Msg) -> None:
        status = status_of(msg)
        if status is None:
            self._gathered.append(msg)
            if len(self._gathered) >= self._wanted:
                self._end(None)
        elif status == CONTROL:
            return
        elif status in ENDS_QUIETLY:
            self._end(None)
        else:
            # nats-py reads a status line without a description into the next header's line.
            description = (msg.headers or {}).get("Description", "").split("\n", 1)[0]
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
        if self._gathered:
            return self._take(batch)
        request: dict[str, Any] = {"batch": batch}
        if wait is None:
            request["no_wait"] = True
        else:
            request["expires"] = int(wait * 1e9)
        self._wanted = batch
        self._answered = asyncio.get_running_loop().create_future()
        try:
            await self._client.publish(
                self._subject, json.dumps(request).encode(), reply=self._inbox
            )
            try:
                async with asyncio.timeout((wait or 0.0) + GRACE_SECONDS):
                    problem = await self._answered
            except TimeoutError:
                problem = None  # the connection dropped meanwhile: nothing came
        finally:
            self._answered = None
            self._wanted = 0
        if problem is not None and not self._gathered:
            raise PullFailed(problem)
        return self._take(batch)

    def _take(self, batch: int) -> list[Msg]:
        taken, self._gathered = self._gathered[:batch], self._gathered[batch:]
        return taken
