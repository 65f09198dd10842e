"""Queries on `idempotency_keys`: claiming keys for new events, reading the events of keys
already held, and pruning keys past their window. Every statement takes a batch of keys."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime

from sqlalchemy import text
from sqlmodel.ext.asyncio.session import AsyncSession

# A key is claimed when it is new or its holder is older than the window (then the key starts
# a new event). Inserted in key order, so two batches sharing keys lock them in the same order
# and cannot deadlock each other. The pairs travel as one JSON array (psycopg dumps a list
# as an array element by element, in Python).
_CLAIM = text(
    """
    INSERT INTO idempotency_keys (owner, key, event_id, created_at)
    SELECT :owner, k.key, k.event_id, now()
    FROM jsonb_to_recordset(CAST(:claims AS jsonb)) AS k(key text, event_id uuid)
    ORDER BY k.key
    ON CONFLICT (owner, key) DO UPDATE
        SET event_id = EXCLUDED.event_id, created_at = EXCLUDED.created_at
        WHERE idempotency_keys.created_at < :expired_before
    RETURNING key, event_id
    """
)
# Its own statement, after the claim: under READ COMMITTED it sees a key another transaction
# committed while the claim waited on it, which the claim's own snapshot would not.
_HELD = text("SELECT key, event_id FROM idempotency_keys WHERE owner = :owner AND key = ANY(:keys)")
# One batch of expired keys by the index on created_at, deleted by their row addresses. A key
# claimed again meanwhile (its row updated: a new address and created_at) is left alone.
# At most `:batch` keys created before `:cutoff` (servicekit.retention.delete_in_batches).
PRUNE_EXPIRED_KEYS = text(
    """
    DELETE FROM idempotency_keys
    WHERE ctid = ANY(ARRAY(
        SELECT ctid FROM idempotency_keys WHERE created_at < :cutoff LIMIT :batch
    ))
    AND created_at < :cutoff
    """
)


class IdempotencyKeyRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def claim(
        self, owner: str, candidates: Mapping[str, uuid.UUID], expired_before: datetime
    ) -> dict[str, uuid.UUID]:
        """Claim each key for its candidate event id; the keys claimed, with those ids."""
        connection = await self.session.connection()
        rows = await connection.execute(
            _CLAIM,
            {
                "owner": owner,
                "claims": json.dumps(
                    [
                        {"key": key, "event_id": str(event_id)}
                        for key, event_id in candidates.items()
                    ]
                ),
                "expired_before": expired_before,
            },
        )
        return {row[0]: row[1] for row in rows}

    async def held(self, owner: str, keys: Sequence[str]) -> dict[str, uuid.UUID]:
        """The events these keys already hold (a key pruned meanwhile is absent)."""
        connection = await self.session.connection()
        rows = await connection.execute(_HELD, {"owner": owner, "keys": list(keys)})
        return {row[0]: row[1] for row in rows}
