"""The portal's figures: 24 h success rates for a page of endpoints, and an endpoint's charts
(deliveries per hour over 24 h and per day over 7 days by outcome, attempt latency p50/p95).
Each is one aggregate query; the shaping is pure code in `charts`."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from fastapi import Depends
from servicekit.web.session import SessionDep
from sqlmodel.ext.asyncio.session import AsyncSession

from webhook_hub.portal.charts import buckets, latency_chart, outcome_chart, success_rate
from webhook_hub.portal.repository import DeliveryStatsRepository

DAY = timedelta(hours=24)
WEEK_DAYS = 7
# Attempts of the last 24 h belong to deliveries created up to a day earlier: the retry
# schedule spans about a day (manual retries of older deliveries are left out).
LATENCY_LOOKBACK = timedelta(hours=48)


@dataclass(frozen=True)
class EndpointCharts:
    hourly: dict[str, Any]
    daily: dict[str, Any]
    latency: dict[str, Any]


class PortalStatsService:
    def __init__(self, session: AsyncSession) -> None:
        self.stats = DeliveryStatsRepository(session)

    async def success_rates(
        self, subscription_ids: list[uuid.UUID], now: datetime | None = None
    ) -> dict[uuid.UUID, float | None]:
        """Each endpoint's share of succeeded deliveries among those created in the last
        24 h that finished: one query for the whole page."""
        since = (now or datetime.now(UTC)) - DAY
        counts = await self.stats.outcomes_by_subscription(subscription_ids, since)
        return {sid: success_rate(counts.get(sid, {})) for sid in subscription_ids}

    async def charts(
        self, subscription_id: uuid.UUID, now: datetime | None = None
    ) -> EndpointCharts:
        """The caller has checked that the subscription is the session owner's."""
        now = now or datetime.now(UTC)
        hours = buckets(now, "hour", 24)
        days = buckets(now, "day", WEEK_DAYS)
        hourly = await self.stats.outcomes_by_bucket(subscription_id, hours[0], "hour")
        daily = await self.stats.outcomes_by_bucket(subscription_id, days[0], "day")
        latency = await self.stats.latency_by_hour(
            subscription_id, hours[0], now - LATENCY_LOOKBACK
        )
        return EndpointCharts(
            hourly=outcome_chart(hourly, hours, "Deliveries per hour, last 24 hours"),
            daily=outcome_chart(daily, days, "Deliveries per day, last 7 days"),
            latency=latency_chart(latency, hours, "Attempt duration, last 24 hours"),
        )


def get_portal_stats_service(session: SessionDep) -> PortalStatsService:
    return PortalStatsService(session)


PortalStatsServiceDep = Annotated[PortalStatsService, Depends(get_portal_stats_service)]
