"""Queries of the portal: the delivery log's hourly rollup (its links' are servicekit's)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import text
from sqlmodel.ext.asyncio.session import AsyncSession

from webhook_hub.deliveries.hour_stats import HourStats
from webhook_hub.partitions import CLOCK_MARGIN

# The rollup's SQL, named so `bench/portal_charts.py` measures exactly what pages run.
STORED_HOURS = (
    "SELECT subscription_id, hour_start, succeeded, failed, attempts, p50_ms, p95_ms "
    "FROM delivery_hour_stats WHERE subscription_id = ANY(:ids) AND hour_start >= :since"
)
# One index range scan of the delivery log per (endpoint, hour) asked for: the hours missing
# from the rollup, typically the current one or two. The attempts' percentiles (a join, the
# costly part) only for `recent` hours (the latency chart's) that are `charted` or will be
# stored: `over` with nothing pending, `charts.is_settled` (a false filter skips the join).
# A settled hour's are of all its deliveries' attempts (computed once, then stored); an hour
# still open, recomputed on every view, takes those of its latest `:live_sample` deliveries:
# an endpoint's busy current hour (35,000 deliveries at 10 a second) cost a page 180-260 ms
# of probes into the attempt log, and its figures move until it settles anyway.
HOURS_FROM_LOG = """
SELECT m.sid, m.hour_start, o.succeeded, o.failed, o.pending, l.attempts, l.p50, l.p95
FROM unnest(
    CAST(:sids AS uuid[]), CAST(:hours AS timestamptz[]), CAST(:over AS boolean[]),
    CAST(:recent AS boolean[]), CAST(:charted AS boolean[])
) AS m(sid, hour_start, over, recent, charted)
CROSS JOIN LATERAL (
    SELECT count(*) FILTER (WHERE status = 'succeeded') AS succeeded,
           count(*) FILTER (WHERE status = 'failed') AS failed,
           count(*) FILTER (WHERE status = 'pending') AS pending
    FROM deliveries
    WHERE subscription_id = m.sid
      AND created_at >= m.hour_start AND created_at < m.hour_start + interval '1 hour'
) AS o
CROSS JOIN LATERAL (
    SELECT count(*) AS attempts,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY a.duration_ms) AS p50,
           percentile_cont(0.95) WITHIN GROUP (ORDER BY a.duration_ms) AS p95
    FROM (
        SELECT d.id, d.first_duration_ms, d.created_at
        FROM deliveries d
        WHERE m.recent AND (m.charted OR (m.over AND o.pending = 0))
          AND d.subscription_id = m.sid
          AND d.created_at >= m.hour_start AND d.created_at < m.hour_start + interval '1 hour'
        ORDER BY d.created_at DESC
        LIMIT CASE WHEN m.over AND o.pending = 0 THEN NULL ELSE CAST(:live_sample AS bigint) END
    ) AS d
    CROSS JOIN LATERAL (
        -- Each delivery's first attempt made from its event, in its row (0014),
        SELECT d.first_duration_ms AS duration_ms WHERE d.first_duration_ms IS NOT NULL
        UNION ALL
        -- and the rest, in the attempt log: its partitions from the delivery's creation on
        -- (partitions.attempts_since), pruned per delivery at run time.
        SELECT a.duration_ms FROM delivery_attempts a
        WHERE a.delivery_id = d.id
          AND a.attempted_at >= d.created_at - CAST(:clock_margin AS interval)
    ) AS a
) AS l
"""
STORE_HOURS = """
INSERT INTO delivery_hour_stats
    (subscription_id, hour_start, succeeded, failed, attempts, p50_ms, p95_ms)
SELECT * FROM unnest(
    CAST(:sids AS uuid[]), CAST(:hours AS timestamptz[]), CAST(:succeeded AS int[]),
    CAST(:failed AS int[]), CAST(:attempts AS int[]), CAST(:p50 AS float8[]),
    CAST(:p95 AS float8[])
)
ON CONFLICT DO NOTHING
"""
FORGET_HOURS = (
    "DELETE FROM delivery_hour_stats WHERE subscription_id = :id "
    "AND hour_start = ANY(CAST(:hours AS timestamptz[]))"
)
# Writers of the rollup and makers of pending deliveries serialise per endpoint on an
# advisory lock (this key space, the endpoint id's hash): the portal shares it while it reads
# the log and stores settled hours, a retry or recover holds it alone while it changes
# deliveries and deletes their hours. Without it a page could store an hour it read as
# settled just after a retry made it pending and deleted its (not yet stored) row.
ROLLUP_LOCK_SPACE = 150010
LOCK_SHARED = (
    "SELECT pg_advisory_xact_lock_shared(:space, hashtext(CAST(o.sid AS text))) "
    "FROM (SELECT sid FROM unnest(CAST(:ids AS uuid[])) AS u(sid) ORDER BY sid) AS o"
)
LOCK_EXCLUSIVE = "SELECT pg_advisory_xact_lock(:space, hashtext(CAST(CAST(:id AS uuid) AS text)))"
# Deliveries of an open hour whose attempts give its percentiles (`HOURS_FROM_LOG`).
LIVE_SAMPLE = 1000


class HourStatsRepository:
    """The rollup `delivery_hour_stats` (migration 0010) and the delivery log's per-hour
    aggregates it is filled from."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def stored(
        self, subscription_ids: Sequence[uuid.UUID], since: datetime
    ) -> dict[tuple[uuid.UUID, datetime], HourStats]:
        rows = await self._rows(STORED_HOURS, ids=list(subscription_ids), since=since)
        return {
            (sid, hour): HourStats(
                succeeded=succeeded, failed=failed, attempts=attempts, p50_ms=p50, p95_ms=p95
            )
            for sid, hour, succeeded, failed, attempts, p50, p95 in rows
        }

    async def from_log(
        self, hours: Sequence[tuple[uuid.UUID, datetime, bool, bool, bool]]
    ) -> dict[tuple[uuid.UUID, datetime], HourStats]:
        """Each (endpoint, hour)'s figures computed from the deliveries and attempts; given
        with whether the hour is over (`charts.is_over`), recent (in the latency chart's
        window) and charted. Percentiles come only with the hours `HOURS_FROM_LOG` says: of
        all attempts for an hour that will be stored, of the latest `LIVE_SAMPLE` deliveries'
        for one still open."""
        if not hours:
            return {}
        columns = list(zip(*hours, strict=True))
        rows = await self._rows(
            HOURS_FROM_LOG,
            sids=list(columns[0]),
            hours=list(columns[1]),
            over=list(columns[2]),
            recent=list(columns[3]),
            charted=list(columns[4]),
            live_sample=LIVE_SAMPLE,
            clock_margin=CLOCK_MARGIN,
        )
        return {
            (sid, hour): HourStats(
                succeeded=int(succeeded),
                failed=int(failed),
                pending=int(pending),
                attempts=int(attempts),
                p50_ms=None if p50 is None else float(p50),
                p95_ms=None if p95 is None else float(p95),
            )
            for sid, hour, succeeded, failed, pending, attempts, p50, p95 in rows
        }

    async def store(self, hours: Mapping[tuple[uuid.UUID, datetime], HourStats]) -> None:
        """Keep settled hours; an hour another page stored meanwhile is left as it is (the
        same figures)."""
        if not hours:
            return
        items = list(hours.items())
        await self._execute(
            STORE_HOURS,
            sids=[sid for (sid, _), _ in items],
            hours=[hour for (_, hour), _ in items],
            succeeded=[stats.succeeded for _, stats in items],
            failed=[stats.failed for _, stats in items],
            attempts=[stats.attempts for _, stats in items],
            p50=[stats.p50_ms for _, stats in items],
            p95=[stats.p95_ms for _, stats in items],
        )

    async def forget(self, subscription_id: uuid.UUID, hours: Sequence[datetime]) -> None:
        if hours:
            await self._execute(FORGET_HOURS, id=subscription_id, hours=list(hours))

    async def lock_for_reading(self, subscription_ids: Sequence[uuid.UUID]) -> None:
        """Until the transaction ends: no retry or recover on these endpoints."""
        await self._execute(LOCK_SHARED, space=ROLLUP_LOCK_SPACE, ids=list(subscription_ids))

    async def lock_for_change(self, subscription_id: uuid.UUID) -> None:
        """Until the transaction ends: no portal stores this endpoint's hours."""
        await self._execute(LOCK_EXCLUSIVE, space=ROLLUP_LOCK_SPACE, id=subscription_id)

    async def _rows(self, sql: str, **params: Any) -> Sequence[Any]:
        connection = await self.session.connection()
        return (await connection.execute(text(sql), params)).all()

    async def _execute(self, sql: str, **params: Any) -> None:
        connection = await self.session.connection()
        await connection.execute(text(sql), params)
