"""Run webhooks, which webhook-hub stores and delivers: registration written so that no
failure leaves a subscription in the hub that we do not know of.

Two databases are written, so no one transaction covers them. The order:

1. a local `pending` row, committed on its own, before the hub is asked;
2. `hub.subscriptions.create` (committed in the hub);
3. the row marked `active` with the hub's subscription id.

A failure at 3 is compensated at once: the hub's subscription is deleted and the pending row
with it, and the client gets a 503 saying nothing was registered. What compensation cannot
reach (the process dies between 2 and 3, the hub's answer is lost to a timeout, the
compensating delete fails) keeps its pending row, and `reconcile` later deletes every
subscription of that client in the hub that has no active row here.

Each step runs in a transaction of its own, so this service takes a session factory instead
of the request's session.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import structlog
from servicekit.auth.api_keys import AccessLevel
from servicekit.contracts.webhook_hub import (
    DeliveryRecord,
    HubRefused,
    HubSubscriptions,
    HubUnavailable,
    PortalLevel,
    PortalLinkIssued,
)
from servicekit.runtime import ServiceRuntime
from servicekit.worker import WorkerLoop
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from scraper_manager.errors import (
    NoPortalYet,
    RegistrationFailed,
    UnknownRunEvents,
    WebhookNotFound,
    WebhookRefused,
)
from scraper_manager.events import RUN_EVENT_TYPES
from scraper_manager.models import ScraperWebhook
from scraper_manager.settings import Settings
from scraper_manager.webhooks.repository import WebhookRepository
from scraper_manager.webhooks.schemas import WebhookCreate, WebhookCreated, WebhookOut

logger = structlog.get_logger(__name__)
SOURCE = "scraper-manager"
# The portal link the dashboard asks for is handed to the browser at once (redirected to):
# five minutes cover its landing page, and a link copied out of the history soon expires.
PORTAL_LINK_SECONDS = 300


def portal_level(level: AccessLevel) -> PortalLevel:
    """The hub's portal at the dashboard user's level, but never above write: the hub hands a
    service no admin link (deleting endpoints there would bypass our own record of them)."""
    return "write" if level.allows(AccessLevel.WRITE) else "read"


def out(webhook: ScraperWebhook) -> WebhookOut:
    assert webhook.subscription_id is not None  # active rows have it (checked by the query)
    return WebhookOut(
        id=webhook.subscription_id,
        url=webhook.url,
        events=webhook.events,
        created_at=webhook.created_at,
    )


@dataclass(frozen=True)
class WebhookOutcomes:
    """A webhook with its last deliveries as the hub reports them; `deliveries` is None when
    the hub could not say (it did not answer, or no longer holds the subscription)."""

    webhook: WebhookOut
    deliveries: list[DeliveryRecord] | None


class WebhookService:
    def __init__(
        self, session_factory: async_sessionmaker[AsyncSession], hub: HubSubscriptions
    ) -> None:
        self.session_factory = session_factory
        self.hub = hub

    async def register(self, owner: str, email: str | None, body: WebhookCreate) -> WebhookCreated:
        unknown = sorted(set(body.events) - set(RUN_EVENT_TYPES))
        if unknown:
            raise UnknownRunEvents(
                f"Unknown event types: {', '.join(unknown)}",
                extra={"invalid_events": unknown, "allowed": list(RUN_EVENT_TYPES)},
            )
        async with self.session_factory() as session, session.begin():
            pending = await WebhookRepository(session).add_pending(owner, body.url, body.events)
        try:
            record = await self.hub.create(
                owner,
                body.url,
                body.events,
                email=email,
                retry_schedule=body.retry_schedule,
                timeout_seconds=body.timeout_seconds,
                filter=body.filter,
                transform=body.transform,
                rate_limit_per_second=body.rate_limit_per_second,
                rate_limit_burst=body.rate_limit_burst,
                ordering=body.ordering,
            )
        except HubRefused as exc:
            # Nothing was created in the hub: the pending row has nothing to lead to.
            await self._forget(pending.id)
            raise WebhookRefused(exc.reply.error, extra=exc.reply.extra) from None
        # HubUnavailable propagates (503); the hub may still have created it (an answer lost
        # to the timeout), which the pending row lets the reconciler find.
        try:
            async with self.session_factory() as session, session.begin():
                webhook = await WebhookRepository(session).activate(pending.id, str(record.id))
        except SQLAlchemyError as exc:
            logger.warning("webhook activation failed; compensating", error=repr(exc))
            await self._compensate(owner, pending.id, record.id)
            raise RegistrationFailed() from exc
        return WebhookCreated(**out(webhook).model_dump(), secret=record.secret)

    async def deliveries(
        self, owner: str, subscription_id: str, limit: int
    ) -> list[DeliveryRecord] | None:
        """The webhook's last `limit` deliveries, newest first, asked of the hub (read only)."""
        await self._active(owner, subscription_id)
        try:
            return await self.hub.deliveries(owner, uuid.UUID(subscription_id), limit=limit)
        except (HubRefused, HubUnavailable) as exc:
            # An overview must not fail for one webhook: "unknown" is told instead.
            logger.warning("deliveries not available", id=subscription_id, error=repr(exc))
            return None

    async def with_deliveries(self, owner: str, limit: int) -> list[WebhookOutcomes]:
        """Every webhook of `owner` with its last deliveries, the hub asked concurrently."""
        webhooks = await self.list(owner)
        outcomes = await asyncio.gather(
            *(self.deliveries(owner, webhook.id, limit) for webhook in webhooks)
        )
        return [WebhookOutcomes(w, d) for w, d in zip(webhooks, outcomes, strict=True)]

    async def portal_link(self, owner: str, level: AccessLevel) -> PortalLinkIssued:
        """A one-time link into webhook-hub's portal for `owner`, signed in at `level` mapped
        by `portal_level`; NoPortalYet when the hub holds no webhook of theirs, HubUnavailable
        when it does not answer."""
        try:
            return await self.hub.portal_link(
                owner, portal_level(level), ttl_seconds=PORTAL_LINK_SECONDS
            )
        except HubRefused as exc:
            if exc.reply.status == 404:
                raise NoPortalYet() from None
            raise WebhookRefused(exc.reply.error) from None

    async def list(self, owner: str) -> list[WebhookOut]:
        async with self.session_factory() as session:
            return [out(row) for row in await WebhookRepository(session).active_of(owner)]

    async def delete(self, owner: str, subscription_id: str) -> None:
        webhook = await self._active(owner, subscription_id)
        try:
            await self.hub.delete(owner, uuid.UUID(subscription_id))
        except HubRefused as exc:
            if exc.reply.status != 404:  # already gone there is what we want
                raise WebhookRefused(exc.reply.error) from None
        # A failure here leaves a row whose subscription is gone: harmless, and the next
        # DELETE (the hub answering 404) removes it.
        async with self.session_factory() as session, session.begin():
            await WebhookRepository(session).remove(webhook.id)

    async def _active(self, owner: str, subscription_id: str) -> ScraperWebhook:
        async with self.session_factory() as session:
            webhook = await WebhookRepository(session).active_by_subscription(
                owner, subscription_id
            )
        if webhook is None:
            raise WebhookNotFound()
        return webhook

    async def _forget(self, webhook_id: str) -> None:
        try:
            async with self.session_factory() as session, session.begin():
                await WebhookRepository(session).remove(webhook_id)
        except SQLAlchemyError as exc:
            logger.warning("pending webhook left to the reconciler", error=repr(exc))

    async def _compensate(self, owner: str, webhook_id: str, subscription_id: uuid.UUID) -> None:
        try:
            await self.hub.delete(owner, subscription_id)
        except (HubRefused, HubUnavailable) as exc:
            logger.warning(
                "compensating delete failed; left to the reconciler",
                subscription_id=str(subscription_id),
                error=repr(exc),
            )
            return
        await self._forget(webhook_id)

    async def reconcile(self, grace: timedelta, now: datetime | None = None) -> int:
        """Delete the hub subscriptions of interrupted registrations; return how many.

        Only clients with a pending row older than `grace` are looked at, and skipped while
        a newer pending row says a registration may be in progress. The hub is listed before
        our rows are read: a registration commits its pending row before asking the hub, so
        any subscription in the list is either active here or pending (in progress)."""
        cutoff = (now or datetime.now(UTC)) - grace
        async with self.session_factory() as session:
            owners = await WebhookRepository(session).owners_with_pending_before(cutoff)
        removed = 0
        for owner in owners:
            try:
                removed += await self._reconcile_owner(owner, cutoff)
            except (HubRefused, HubUnavailable) as exc:
                logger.warning("webhook reconciliation postponed", owner=owner, error=repr(exc))
        return removed

    async def _reconcile_owner(self, owner: str, cutoff: datetime) -> int:
        in_hub = await self.hub.list(owner)
        async with self.session_factory() as session:
            repository = WebhookRepository(session)
            if await repository.pending_since(owner, cutoff):
                return 0
            known = {row.subscription_id for row in await repository.active_of(owner)}
        orphans: Sequence[uuid.UUID] = [s.id for s in in_hub if str(s.id) not in known]
        for subscription_id in orphans:
            await self.hub.delete(owner, subscription_id)
            logger.info("orphan subscription deleted", owner=owner, id=str(subscription_id))
        async with self.session_factory() as session, session.begin():
            await WebhookRepository(session).remove_pending_before(owner, cutoff)
        return len(orphans)


def webhook_reconcile_loop(settings: Settings) -> WorkerLoop:
    """The worker's side of safe registration: every `webhook_reconcile_seconds`, interrupted
    registrations are settled (see `WebhookService.reconcile`)."""

    async def run(runtime: ServiceRuntime, stop: asyncio.Event) -> None:
        hub = HubSubscriptions(
            runtime.nats, source=SOURCE, timeout=settings.hub_request_timeout_seconds
        )
        service = WebhookService(runtime.session_factory, hub)
        grace = timedelta(seconds=settings.webhook_pending_grace_seconds)
        runtime.progress.beat("webhook-reconcile", settings.webhook_reconcile_seconds)
        while not stop.is_set():
            try:
                await service.reconcile(grace)
                runtime.progress.beat("webhook-reconcile", settings.webhook_reconcile_seconds)
            except Exception as exc:
                logger.warning("webhook reconciliation failed", error=repr(exc))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), settings.webhook_reconcile_seconds)

    return run
