"""Queries of the portal: `portal_links`, and the delivery log's aggregates."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import text
from sqlmodel.ext.asyncio.session import AsyncSession

from webhook_hub.models import PortalLink

# The aggregates' SQL, named so `bench/portal_charts.py` measures exactly what pages run.
OUTCOMES_BY_SUBSCRIPTION = (
    "SELECT subscription_id, status, count(*) FROM deliveries "
    "WHERE subscription_id = ANY(:ids) AND created_at >= :since "
    "GROUP BY subscription_id, status"
)
# date_bin is arithmetic on the timestamp; date_trunc with a time zone converts every row,
# several times slower over a million rows. The origin is a UTC midnight: buckets are UTC.
OUTCOMES_BY_BUCKET = (
    "SELECT date_bin(CAST(:step AS interval), created_at, TIMESTAMPTZ '2000-01-01 00:00Z') "
    "AS bucket, status, count(*) "
    "FROM deliveries WHERE subscription_id = :id AND created_at >= :since "
    "GROUP BY 1, 2"
)
LATENCY_BY_HOUR = (
    "SELECT date_bin('1 hour', a.attempted_at, TIMESTAMPTZ '2000-01-01 00:00Z') AS bucket, "
    "percentile_cont(0.5) WITHIN GROUP (ORDER BY a.duration_ms), "
    "percentile_cont(0.95) WITHIN GROUP (ORDER BY a.duration_ms) "
    "FROM deliveries d JOIN delivery_attempts a ON a.delivery_id = d.id "
    "WHERE d.subscription_id = :id AND d.created_at >= :created_since "
    "AND a.attempted_at >= :since GROUP BY 1"
)


class PortalLinkRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def add(self, link: PortalLink) -> PortalLink:
        self.session.add(link)
        await self.session.flush()
        return link

    async def get(self, token_hash: str) -> PortalLink | None:
        return await self.session.get(PortalLink, token_hash)

    async def claim(self, token_hash: str, now: datetime) -> tuple[str, str] | None:
        """Mark the link used if it is unused and unexpired, in one statement (two tabs
        opening it at once: one wins); its owner and level, or None."""
        connection = await self.session.connection()
        row = (
            await connection.execute(
                text(
                    "UPDATE portal_links SET used_at = :now WHERE token_hash = :hash "
                    "AND used_at IS NULL AND expires_at > :now RETURNING owner, level"
                ),
                {"hash": token_hash, "now": now},
            )
        ).first()
        return None if row is None else (str(row[0]), str(row[1]))


class DeliveryStatsRepository:
    """Aggregates for the portal's list and charts: one statement each, whatever the number of
    endpoints or buckets, over the covering indexes of migration 0009 (index-only scans)."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def outcomes_by_subscription(
        self, subscription_ids: Sequence[uuid.UUID], since: datetime
    ) -> dict[uuid.UUID, dict[str, int]]:
        """Deliveries created since `since`, counted by status, per subscription."""
        if not subscription_ids:
            return {}
        rows = await self._rows(
            OUTCOMES_BY_SUBSCRIPTION,
            ids=list(subscription_ids),
            since=since,
        )
        counts: dict[uuid.UUID, dict[str, int]] = {}
        for subscription_id, status, count in rows:
            counts.setdefault(subscription_id, {})[str(status)] = int(count)
        return counts

    async def outcomes_by_bucket(
        self, subscription_id: uuid.UUID, since: datetime, unit: str
    ) -> list[tuple[datetime, str, int]]:
        """(bucket start in UTC, status, deliveries created in it) for one subscription."""
        step = {"hour": "1 hour", "day": "1 day"}[unit]
        rows = await self._rows(OUTCOMES_BY_BUCKET, step=step, id=subscription_id, since=since)
        return [(bucket, str(status), int(count)) for bucket, status, count in rows]

    async def latency_by_hour(
        self, subscription_id: uuid.UUID, since: datetime, created_since: datetime
    ) -> list[tuple[datetime, float, float]]:
        """(hour in UTC, p50, p95 of attempt durations in ms) of the attempts made since
        `since` on deliveries created since `created_since` (an attempt belongs to a delivery;
        bounding the deliveries keeps the join to the recent part of the log)."""
        rows = await self._rows(
            LATENCY_BY_HOUR,
            id=subscription_id,
            since=since,
            created_since=created_since,
        )
        return [(bucket, float(p50), float(p95)) for bucket, p50, p95 in rows]

    async def _rows(self, sql: str, **params: Any) -> Sequence[Any]:
        connection = await self.session.connection()
        return (await connection.execute(text(sql), params)).all()
