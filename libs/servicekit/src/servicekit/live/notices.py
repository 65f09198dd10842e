"""Change notices: which keys (a subscription's id, a run's id) changed, sent after commit on a
core NATS subject (fire and forget: a notice only wakes streams, which then read the database,
so a lost one costs staleness until the next change, never a wrong view)."""

from __future__ import annotations

import re
from collections.abc import Iterable

import structlog

from servicekit.runtime import NatsConnection

logger = structlog.get_logger(__name__)

# What a key may be: ids as their services print them. Anything else in a notice is dropped.
_KEY = re.compile(r"[A-Za-z0-9_.:-]{1,100}")


def encode_keys(keys: Iterable[object]) -> bytes:
    """One key a line, each once (an empty notice for no keys)."""
    return "\n".join(sorted({str(key) for key in keys})).encode()


def parse_keys(data: bytes) -> frozenset[str]:
    """The keys a notice names; any bytes in, never an exception (lines that are not keys are
    left out, and a notice that is not ASCII names none)."""
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        return frozenset()
    return frozenset(line for line in text.split("\n") if _KEY.fullmatch(line))


class LiveAnnouncer:
    """Publishes change notices for the live streams of every API process of a service."""

    def __init__(self, nats: NatsConnection, subject: str) -> None:
        self._nats = nats
        self.subject = subject

    async def changed(self, keys: Iterable[object]) -> None:
        """Tell the live streams that `keys` changed; call after the change is committed.
        Never raises: the change is stored whatever becomes of its notice."""
        data = encode_keys(keys)
        if not data:
            return
        try:
            await self._nats.client.publish(self.subject, data)
        except Exception as exc:
            logger.debug("live notice not sent", subject=self.subject, error=repr(exc))
