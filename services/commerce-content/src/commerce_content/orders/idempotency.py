"""Idempotent checkout: an `Idempotency-Key` makes a retried checkout return the first answer
instead of creating a second order and a second payment session.

The key is claimed by a row of `checkout_idempotency_keys` inserted in the same transaction as
the order. Of two requests with one key, the second's insert waits on the first's row lock:
when the first commits, the second reads its stored answer; when it rolls back (a refused
cart), the second claims the key and runs. So N concurrent requests create one order, and a
refused checkout (which changed nothing) holds no key.

A key is scoped to its caller (`jwt:<user>`, `api_key:<owner>`, or `anonymous`) and holds for
`CHECKOUT_IDEMPOTENCY_HOURS`; the worker prunes older rows (servicekit.retention). The request
it stands for is a SHA-256 of the surface (REST or GraphQL) and the canonical JSON of the
cart, so the same key with another body, or on the other surface, is refused (422), as
Stripe does.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from servicekit.retention import Progress, delete_in_batches, pruning_loop
from servicekit.worker import WorkerLoop
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlmodel.ext.asyncio.session import AsyncSession

from commerce_content.errors import AlreadyDone, IdempotencyKeyReused, InvalidRequest
from commerce_content.identity.dependencies import Caller
from commerce_content.orders.checkout import CheckoutResult
from commerce_content.settings import Settings

HEADER = "Idempotency-Key"
# Stripe's limit; a V4 UUID is 36.
MAX_KEY_LENGTH = 255
ANONYMOUS = "anonymous"
REST_SURFACE = "POST /api/orders/checkout"
GRAPHQL_SURFACE = "graphql createOrder"
PRUNE_LOOP = "checkout-idempotency-retention"


def parse_key(raw: str | None) -> str | None:
    """The header's key, None when absent; 1 to 255 visible ASCII characters, else 400."""
    if raw is None:
        return None
    if not 1 <= len(raw) <= MAX_KEY_LENGTH or not all("!" <= c <= "~" for c in raw):
        raise InvalidRequest(
            f"{HEADER} must be 1 to {MAX_KEY_LENGTH} visible ASCII characters (a UUID is best)"
        )
    return raw


def scope_of(caller: Caller | None) -> str:
    """Keys are the caller's own: another user's identical key is another key."""
    return ANONYMOUS if caller is None else f"{caller.via}:{caller.subject}"


def fingerprint(surface: str, payload: Any) -> str:
    """The request a key stands for: key order and spacing of the JSON do not matter."""
    canonical = json.dumps(
        [surface, payload], sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class CheckoutAnswer:
    order_id: uuid.UUID
    payment_url: str
    replayed: bool


# A key is claimed when new, or when its holder is past the window (then it starts afresh).
# Under READ COMMITTED an insert meeting an uncommitted row with the same key waits for it.
_CLAIM = text(
    """
    INSERT INTO checkout_idempotency_keys (scope, key, fingerprint, created_at)
    VALUES (:scope, :key, :fingerprint, now())
    ON CONFLICT (scope, key) DO UPDATE
        SET fingerprint = EXCLUDED.fingerprint, created_at = EXCLUDED.created_at,
            order_id = NULL, payment_url = NULL
        WHERE checkout_idempotency_keys.created_at < :expired_before
    RETURNING key
    """
)
# Its own statement after the claim, so it sees the row the claim waited for.
_HELD = text(
    """
    SELECT fingerprint, order_id, payment_url FROM checkout_idempotency_keys
    WHERE scope = :scope AND key = :key
    """
)
_RECORD = text(
    """
    UPDATE checkout_idempotency_keys SET order_id = :order_id, payment_url = :payment_url
    WHERE scope = :scope AND key = :key
    """
)
# One batch of keys past the window by the index on created_at (delete_in_batches).
PRUNE_EXPIRED = text(
    """
    DELETE FROM checkout_idempotency_keys
    WHERE ctid = ANY(ARRAY(
        SELECT ctid FROM checkout_idempotency_keys WHERE created_at < :cutoff LIMIT :batch
    ))
    AND created_at < :cutoff
    """
)


class CheckoutKeyRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def claim(self, scope: str, key: str, print_: str, expired_before: datetime) -> bool:
        connection = await self.session.connection()
        row = await connection.execute(
            _CLAIM,
            {"scope": scope, "key": key, "fingerprint": print_, "expired_before": expired_before},
        )
        return row.first() is not None

    async def held(self, scope: str, key: str) -> tuple[str, uuid.UUID | None, str | None] | None:
        connection = await self.session.connection()
        row = (await connection.execute(_HELD, {"scope": scope, "key": key})).first()
        return None if row is None else (row[0], row[1], row[2])

    async def record(self, scope: str, key: str, order_id: uuid.UUID, payment_url: str) -> None:
        connection = await self.session.connection()
        await connection.execute(
            _RECORD,
            {"scope": scope, "key": key, "order_id": order_id, "payment_url": payment_url},
        )


class IdempotentCheckout:
    """Runs a checkout at most once per (scope, key) within the window."""

    def __init__(self, session: AsyncSession, window: timedelta) -> None:
        self.keys = CheckoutKeyRepository(session)
        self.window = window

    async def run(
        self,
        scope: str,
        key: str | None,
        print_: str,
        checkout: Callable[[], Awaitable[CheckoutResult]],
    ) -> CheckoutAnswer:
        if key is None:
            result = await checkout()
            return CheckoutAnswer(result.order.id, result.payment_url, replayed=False)
        # Twice at most: a key pruned between the claim and the read is claimable again.
        for _ in range(2):
            expired_before = datetime.now(UTC) - self.window
            if await self.keys.claim(scope, key, print_, expired_before):
                result = await checkout()
                await self.keys.record(scope, key, result.order.id, result.payment_url)
                return CheckoutAnswer(result.order.id, result.payment_url, replayed=False)
            held = await self.keys.held(scope, key)
            if held is None:
                continue
            held_print, order_id, payment_url = held
            if held_print != print_:
                raise IdempotencyKeyReused(
                    f"{HEADER} {key!r} was used with another request in the last"
                    f" {self.window.total_seconds() / 3600:g} hours; use a new key"
                )
            if order_id is None or payment_url is None:  # committed unanswered: not by us
                break
            return CheckoutAnswer(order_id, payment_url, replayed=True)
        raise AlreadyDone(f"{HEADER} {key!r} is in use by another request; retry")


async def prune_expired_keys(
    engine: AsyncEngine, cutoff: datetime, batch: int, progress: Progress = lambda: None
) -> int:
    """Delete the keys created before `cutoff`, `batch` per transaction; how many."""
    return await delete_in_batches(
        engine, PRUNE_EXPIRED, {"cutoff": cutoff}, batch=batch, progress=progress
    )


def idempotency_retention_loop(settings: Settings) -> WorkerLoop:
    """Every `RETENTION_PRUNE_SECONDS`, the keys past `CHECKOUT_IDEMPOTENCY_HOURS` deleted."""
    window = timedelta(hours=settings.checkout_idempotency_hours)
    batch = settings.retention_batch_size

    async def prune(engine: AsyncEngine, now: datetime, progress: Progress) -> int:
        return await prune_expired_keys(engine, now - window, batch, progress)

    return pruning_loop(PRUNE_LOOP, prune, settings.retention_prune_seconds)
