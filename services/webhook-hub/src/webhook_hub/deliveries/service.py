"""The delivery log as a consumer sees it: listing, inspecting, retrying, recovering."""

from __future__ import annotations

import uuid
from datetime import datetime

from servicekit.paging import Page, decode_time_id_cursor, encode_time_id_cursor, page_of
from sqlmodel.ext.asyncio.session import AsyncSession

from webhook_hub.deliveries.as_sent import RequestsAsSent, requests_as_sent
from webhook_hub.deliveries.hour_stats import truncate
from webhook_hub.deliveries.hour_stats_repository import HourStatsRepository
from webhook_hub.deliveries.repository import DeliveryRepository, HeldKey, held_keys
from webhook_hub.deliveries.search import PAYLOAD_SCAN_LIMIT, LogSearch
from webhook_hub.delivery_engine.store import DeliveryWrites
from webhook_hub.errors import DeliveryNotFound, SubscriptionNotFound
from webhook_hub.models import Delivery, DeliveryAttempt, DeliveryStatus, Subscription
from webhook_hub.settings import Settings
from webhook_hub.subscriptions.repository import SubscriptionRepository


class DeliveryService:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session
        self.deliveries = DeliveryRepository(session)
        # Writes of deliveries go through the delivery store, as the engine's do.
        self.writes = DeliveryWrites(session)
        self.subscriptions = SubscriptionRepository(session)
        self.rollup = HourStatsRepository(session)

    async def _owned_subscription(self, owner: str, subscription_id: uuid.UUID) -> None:
        if await self.subscriptions.get_owned(subscription_id, owner) is None:
            raise SubscriptionNotFound()

    async def owned_subscription(self, owner: str, subscription_id: uuid.UUID) -> None:
        """SubscriptionNotFound unless `owner` has this subscription."""
        await self._owned_subscription(owner, subscription_id)

    async def page(
        self,
        owner: str,
        subscription_id: uuid.UUID,
        *,
        limit: int,
        cursor: str | None,
        status: DeliveryStatus | None,
        event_type: str | None,
        created_from: datetime | None = None,
        created_to: datetime | None = None,
        search: LogSearch | None = None,
        scan_limit: int = PAYLOAD_SCAN_LIMIT,
    ) -> Page[Delivery]:
        """A page of the log, newest first. A payload search reads at most
        `scan_limit` deliveries past the cursor: when they hold less than a page of
        matches, the next cursor is the last one read, so the next page searches on."""
        await self._owned_subscription(owner, subscription_id)
        after = decode_time_id_cursor(cursor)
        pattern = search.like_pattern() if search else None
        edge = None
        if pattern is not None:
            edge = await self.deliveries.scan_edge(
                subscription_id,
                scan=scan_limit,
                after=after,
                status=status,
                event_type=event_type,
                created_from=created_from,
                created_to=created_to,
            )
        rows = list(
            await self.deliveries.page(
                subscription_id,
                limit=limit + 1,
                after=after,
                event_id=search.event_id if search else None,
                payload_like=pattern,
                down_to=edge,
                status=status,
                event_type=event_type,
                created_from=created_from,
                created_to=created_to,
            )
        )
        page = page_of(rows, limit, lambda row: encode_time_id_cursor(row.created_at, row.id))
        if page.next_cursor is None and edge is not None:
            return Page(items=page.items, next_cursor=encode_time_id_cursor(*edge))
        return page

    async def held_keys(
        self, owner: str, subscription_id: uuid.UUID, limit: int = 20
    ) -> list[HeldKey]:
        """The subscription's keys held by a failing delivery (ordered delivery)."""
        await self._owned_subscription(owner, subscription_id)
        return await held_keys(self.session, subscription_id, limit)

    async def get(
        self, owner: str, delivery_id: uuid.UUID
    ) -> tuple[Delivery, list[DeliveryAttempt]]:
        delivery = await self.deliveries.get_owned(delivery_id, owner)
        if delivery is None:
            raise DeliveryNotFound()
        return delivery, await self.deliveries.attempts_of(delivery)

    async def as_sent(
        self,
        delivery: Delivery,
        attempts: list[DeliveryAttempt],
        subscription: Subscription,
        settings: Settings,
    ) -> RequestsAsSent:
        """The requests `delivery`'s attempts sent (of a delivery and subscription `get` and
        `SubscriptionService.get` gave the owner)."""
        return requests_as_sent(
            delivery,
            await self.deliveries.payload_text(delivery.id),
            attempts,
            subscription,
            transition_seconds=settings.secret_transition_seconds,
            user_agent=settings.user_agent,
        )

    async def retry(self, owner: str, delivery_id: uuid.UUID) -> Delivery:
        delivery = await self.deliveries.get_owned(delivery_id, owner)
        if delivery is None:
            raise DeliveryNotFound()
        # A settled delivery turns pending only here and in `recover`: its hour leaves the
        # portal's rollup in the same transaction (`portal.stats`).
        await self.rollup.lock_for_change(delivery.subscription_id)
        await self.writes.schedule_now(delivery)
        await self.rollup.forget(delivery.subscription_id, [truncate(delivery.created_at, "hour")])
        return delivery

    async def recover(self, owner: str, subscription_id: uuid.UUID, since: datetime) -> int:
        await self._owned_subscription(owner, subscription_id)
        await self.rollup.lock_for_change(subscription_id)
        moved = await self.writes.reschedule_failed_since(subscription_id, since)
        await self.rollup.forget(subscription_id, list(moved))
        return sum(moved.values())

    async def recover_all(
        self, owner: str, subscription_id: uuid.UUID, since: datetime
    ) -> dict[str, int]:
        """The portal's recovery: failed deliveries created since `since` and those waiting
        for a retry, all due now; how many of each ({"failed": n, "retrying": m})."""
        await self._owned_subscription(owner, subscription_id)
        await self.rollup.lock_for_change(subscription_id)
        # The waiting ones first: the failed ones turn pending with attempts behind them.
        retrying = await self.writes.reschedule_retrying_since(subscription_id, since)
        failed = await self.writes.reschedule_failed_since(subscription_id, since)
        # Retrying ones were pending already (their hours are not in the rollup).
        await self.rollup.forget(subscription_id, list(failed))
        return {"failed": sum(failed.values()), "retrying": sum(retrying.values())}

    async def retry_many(
        self, owner: str, subscription_id: uuid.UUID, delivery_ids: list[uuid.UUID]
    ) -> int:
        """Those of `delivery_ids` that are this owner's endpoint's and failed or pending, due
        now; how many."""
        await self._owned_subscription(owner, subscription_id)
        await self.rollup.lock_for_change(subscription_id)
        moved = await self.writes.schedule_now_many(subscription_id, delivery_ids)
        await self.rollup.forget(subscription_id, list(moved))
        return sum(moved.values())

    # --- the rate limit (issue 32) ---

    async def held_by_rate_limit(self, subscription: Subscription, cap: int) -> int | None:
        """How many of a rate-limited subscription's deliveries wait for its limit (up to
        `cap`); None for an unlimited one."""
        if subscription.rate_limit_per_second is None:
            return None
        return await self.deliveries.held_by_rate_limit(subscription.id, cap)
