"""The portal's figures: 24 h success rates for a page of endpoints, and an endpoint's charts
(deliveries per hour over 24 h and per day over 7 days by outcome, attempt latency p50/p95).

All of them are read per (endpoint, hour) from the rollup `delivery_hour_stats`; an hour it
lacks is computed from the delivery log and, once settled (over, and nothing in it pending),
stored for every later view. So a page reads the log only for the current hour or two, and
the delivery engine writes nothing for the charts. Shaping is pure code in `charts`."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any

import structlog
from fastapi import Depends
from servicekit.loops import describe, is_outage
from servicekit.web_session import SessionDep
from sqlmodel.ext.asyncio.session import AsyncSession

from webhook_hub.deliveries.hour_stats_repository import HourStatsRepository
from webhook_hub.portal.charts import (
    HourStats,
    buckets,
    day_rows,
    hours_between,
    is_over,
    is_settled,
    latency_chart,
    latency_rows,
    outcome_chart,
    outcome_rows,
    success_rate,
    total_counts,
)

logger = structlog.get_logger(__name__)
ROLLUP = "chart rollup"
WEEK_DAYS = 7
LATENCY_HOURS = 24  # the hourly and latency charts' buckets


@dataclass(frozen=True)
class EndpointCharts:
    hourly: dict[str, Any]
    daily: dict[str, Any]
    latency: dict[str, Any]


class PortalStatsService:
    def __init__(self, session: AsyncSession) -> None:
        self.hours = HourStatsRepository(session)

    async def success_rates(
        self, subscription_ids: list[uuid.UUID], now: datetime | None = None
    ) -> dict[uuid.UUID, float | None]:
        """Each endpoint's share of succeeded deliveries among the finished ones created in
        the hourly chart's 24 buckets (this hour and the 23 before): one read of the log for
        the whole page."""
        now = now or datetime.now(UTC)
        stats = await self._hour_stats(
            subscription_ids, buckets(now, "hour", LATENCY_HOURS)[0], now, charted=False
        )
        return {
            sid: success_rate(total_counts(s for (owner, _), s in stats.items() if owner == sid))
            for sid in subscription_ids
        }

    async def day_totals(
        self, subscription_ids: list[uuid.UUID], now: datetime | None = None
    ) -> dict[uuid.UUID, dict[str, int]]:
        """Each endpoint's deliveries created in the hourly chart's 24 buckets, by status
        (succeeded, failed, pending): the one source of the endpoint list's and page's
        health figures, so a rate never stands beside counts it leaves out."""
        now = now or datetime.now(UTC)
        stats = await self._hour_stats(
            subscription_ids, buckets(now, "hour", LATENCY_HOURS)[0], now, charted=False
        )
        return {
            sid: total_counts(s for (owner, _), s in stats.items() if owner == sid)
            for sid in subscription_ids
        }

    async def charts(
        self, subscription_id: uuid.UUID, now: datetime | None = None
    ) -> EndpointCharts:
        """The caller has checked that the subscription is the session owner's. The latency
        chart puts each attempt in the hour its delivery was created (the hour of its first
        attempt), the rollup's key."""
        now = now or datetime.now(UTC)
        hours = buckets(now, "hour", LATENCY_HOURS)
        days = buckets(now, "day", WEEK_DAYS)
        stats = await self._hour_stats([subscription_id], min(days[0], hours[0]), now, charted=True)
        by_hour = {hour: s for (_, hour), s in stats.items()}
        last_day = {hour: s for hour, s in by_hour.items() if hour >= hours[0]}
        return EndpointCharts(
            hourly=outcome_chart(
                outcome_rows(last_day), hours, "Deliveries per hour, last 24 hours"
            ),
            daily=outcome_chart(day_rows(by_hour), days, "Deliveries per day, last 7 days"),
            latency=latency_chart(latency_rows(last_day), hours, "Attempt duration, last 24 hours"),
        )

    async def _hour_stats(
        self,
        subscription_ids: Sequence[uuid.UUID],
        since: datetime,
        now: datetime,
        charted: bool,
    ) -> dict[tuple[uuid.UUID, datetime], HourStats]:
        """Every (endpoint, hour) from `since`'s hour to now: the rollup's rows, the rest
        from the log (the settled ones of which are stored). Attempt percentiles are computed
        only for the latency chart's 24 hours, and there only for hours stored or `charted`:
        an older hour's are never shown, and stay null in its row."""
        if not subscription_ids:
            return {}
        stats = await self.hours.stored(subscription_ids, since)
        latency_from = buckets(now, "hour", LATENCY_HOURS)[0]
        missing = [
            (sid, hour, is_over(hour, now), hour >= latency_from, charted)
            for sid in subscription_ids
            for hour in hours_between(since, now)
            if (sid, hour) not in stats
        ]
        if missing:
            await self.hours.lock_for_reading(sorted({sid for sid, *_ in missing}))
            fresh = await self.hours.from_log(missing)
            await self.keep_settled(
                {key: s for key, s in fresh.items() if is_settled(key[1], s, now)}
            )
            stats.update(fresh)
        return stats

    async def keep_settled(self, hours: Mapping[tuple[uuid.UUID, datetime], HourStats]) -> None:
        """Store settled hours in the rollup, each on its own: an hour PostgreSQL refuses (its
        endpoint deleted meanwhile, a count past its column) is left out with an error line
        naming it, and the page still shows it (computed from the log, as it will be again
        on the next view). The others are stored. An outage raises, as any read would."""
        if not hours:
            return
        session = self.hours.session
        try:
            async with session.begin_nested():
                await self.hours.store(hours)
            return
        except Exception as exc:
            if is_outage(exc):
                raise
        for key, stats in hours.items():
            try:
                async with session.begin_nested():
                    await self.hours.store({key: stats})
            except Exception as exc:
                if is_outage(exc):
                    raise
                logger.error(
                    "rollup hour not stored",
                    loop=ROLLUP,
                    subscription_id=str(key[0]),
                    hour=key[1].isoformat(),
                    error=describe(exc),
                )


def get_portal_stats_service(session: SessionDep) -> PortalStatsService:
    return PortalStatsService(session)


PortalStatsServiceDep = Annotated[PortalStatsService, Depends(get_portal_stats_service)]
