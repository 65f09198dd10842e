"""The rules of subscriptions: who owns them, which events they may take, which endpoints they
may point at, and how their secret rotates."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from servicekit.contracts.webhook_hub import SubscriptionOrdering
from servicekit.events import new_event_id
from servicekit.paging import Page, decode_time_id_cursor, encode_time_id_cursor, page_of
from servicekit.signing import generate_secret
from sqlmodel.ext.asyncio.session import AsyncSession

from webhook_hub.delivery_engine.endpoint_policy import EndpointGuard, EndpointRefused
from webhook_hub.delivery_engine.store import DeliveryWrites
from webhook_hub.errors import (
    BurstWithoutRateLimit,
    EndpointNotAllowed,
    InvalidExpression,
    OrderingWithRateLimit,
    PersonalDataNotApproved,
    SubscriptionLimitReached,
    SubscriptionNotFound,
    UnknownEventTypes,
)
from webhook_hub.event_types.repository import EventTypeRepository
from webhook_hub.events import TEST_EVENT_TYPE
from webhook_hub.expressions import ExpressionError, Kind, compile_expression
from webhook_hub.models import Delivery, EventType, Subscription
from webhook_hub.settings import Settings
from webhook_hub.subscriptions.repository import SubscriptionRepository
from webhook_hub.subscriptions.retry_settings import InEffect, in_effect, schedule_seconds
from webhook_hub.subscriptions.schemas import (
    CLEARABLE_FIELDS,
    EDITABLE_FIELDS,
    EXPRESSION_FIELDS,
    DeliveryDefaults,
    SubscriptionCreate,
    SubscriptionUpdate,
)

WILDCARD = "*"


@dataclass(frozen=True)
class Rotation:
    secret: str
    valid_until: datetime


class SubscriptionService:
    def __init__(self, session: AsyncSession, settings: Settings, guard: EndpointGuard) -> None:
        self.session = session
        self.settings = settings
        self.guard = guard
        self.subscriptions = SubscriptionRepository(session)
        self.deliveries = DeliveryWrites(session)
        self.event_types = EventTypeRepository(session)

    async def commit(self) -> None:
        """End the request's unit of work now, before an outbound call (the creation probe)
        that must not hold a transaction open; the session is not used afterwards."""
        await self.session.commit()

    async def check_events(
        self, events: list[str], *, owner: str, source: str | None = None
    ) -> None:
        named = [name for name in events if name != WILDCARD]
        known = (
            await self.event_types.names_of_source(source)
            if source is not None
            else await self.event_types.active_names(named, owner)
        )
        if source is not None and WILDCARD in events:
            raise UnknownEventTypes([WILDCARD])
        unknown = [name for name in named if name not in known]
        if unknown:
            raise UnknownEventTypes(unknown)
        # `*` stays allowed: dispatch leaves personal-data events out for unapproved owners.
        personal = await self.event_types.personal_names(named)
        if personal and not await self.subscriptions.personal_data_approved(owner):
            raise PersonalDataNotApproved(personal)

    async def check_endpoint(self, url: str) -> None:
        try:
            await self.guard.check(url)
        except EndpointRefused as exc:
            raise EndpointNotAllowed(str(exc)) from exc

    async def create(
        self,
        owner: str,
        email: str | None,
        body: SubscriptionCreate,
        *,
        source: str | None = None,
    ) -> tuple[Subscription, Delivery]:
        check_expressions({"filter": body.filter, "transform": body.transform})
        await self.check_events(body.events, owner=owner, source=source)
        await self.check_endpoint(body.endpoint_url)
        check_ordering(body.ordering)
        if body.ordering is not None and body.rate_limit_per_second is not None:
            raise OrderingWithRateLimit()
        consumer = await self.subscriptions.ensure_consumer(owner, email)
        limit = self.settings.max_subscriptions_per_owner
        if await self.subscriptions.lock_and_count(owner) >= limit:
            raise SubscriptionLimitReached(limit)
        # One moment for both: `updated_at == created_at` says "never changed" (the portal's
        # delivery page then knows the URL and headers every attempt was sent with).
        now = datetime.now(UTC)
        subscription = await self.subscriptions.add(
            Subscription(
                created_at=now,
                updated_at=now,
                consumer_id=consumer.id,
                owner=owner,
                endpoint_url=body.endpoint_url,
                secret=generate_secret(),
                description=body.description,
                events=body.events,
                headers=body.headers,
                timeout_seconds=body.timeout_seconds,
                send_trace_context=body.send_trace_context,
                created_by_source=source,
                retry_schedule=_seconds(body.retry_schedule),
                filter=body.filter,
                transform=body.transform,
                rate_limit_per_second=body.rate_limit_per_second,
                rate_limit_burst=body.rate_limit_burst,
                ordering=stored_ordering(body.ordering),
            )
        )
        test = await self.queue_test(subscription)
        return subscription, test

    async def queue_test(self, subscription: Subscription) -> Delivery:
        return await self.deliveries.add(
            subscription.id,
            event_id=new_event_id(),
            event_type=TEST_EVENT_TYPE,
            payload={
                "subscription_id": str(subscription.id),
                "message": "A test event from webhook-hub: your endpoint is subscribed.",
            },
            event_time=datetime.now(UTC),
        )

    async def queue_example(self, subscription: Subscription, event_type: EventType) -> Delivery:
        """A new event of `event_type` carrying its example payload, to this subscription only:
        queued as `queue_test` queues the test event (one of `example_choices`)."""
        return await self.deliveries.add(
            subscription.id,
            event_id=new_event_id(),
            event_type=event_type.name,
            payload=dict(event_type.example_payload),
            event_time=datetime.now(UTC),
        )

    async def get(self, owner: str, subscription_id: uuid.UUID) -> Subscription:
        subscription = await self.subscriptions.get_owned(subscription_id, owner)
        if subscription is None:
            raise SubscriptionNotFound()
        return subscription

    async def page(
        self,
        owner: str,
        *,
        limit: int,
        cursor: str | None,
        is_active: bool | None,
        event_type: str | None,
        source: str | None = None,
    ) -> Page[Subscription]:
        rows = list(
            await self.subscriptions.page(
                owner,
                limit=limit + 1,
                after=decode_time_id_cursor(cursor),
                is_active=is_active,
                event_type=event_type,
                created_by_source=source,
            )
        )
        return page_of(rows, limit, lambda row: encode_time_id_cursor(row.created_at, row.id))

    async def update(
        self, owner: str, subscription_id: uuid.UUID, patch: SubscriptionUpdate
    ) -> Subscription:
        subscription = await self.subscriptions.get_owned_for_update(subscription_id, owner)
        if subscription is None:
            raise SubscriptionNotFound()
        changes: dict[str, Any] = patch.model_dump(exclude_unset=True)
        check_expressions({name: changes.get(name) for name in EXPRESSION_FIELDS})
        if changes.get("events") is not None:
            await self.check_events(
                changes["events"], owner=owner, source=subscription.created_by_source
            )
        if changes.get("endpoint_url") is not None:
            await self.check_endpoint(changes["endpoint_url"])
        if "retry_schedule" in changes:
            changes["retry_schedule"] = _seconds(changes["retry_schedule"])
        if "ordering" in changes:
            check_ordering(patch.ordering)
            changes["ordering"] = stored_ordering(patch.ordering)
        for field in EDITABLE_FIELDS:
            if field in changes and (changes[field] is not None or field in CLEARABLE_FIELDS):
                setattr(subscription, field, changes[field])
        for field in EXPRESSION_FIELDS:  # `null` removes one
            if field in changes:
                setattr(subscription, field, changes[field] or None)
        if "rate_limit_per_second" in changes or "rate_limit_burst" in changes:
            self._set_rate_limit(subscription, changes)
        if subscription.ordering is not None and subscription.rate_limit_per_second is not None:
            raise OrderingWithRateLimit()
        if changes.get("is_active") is True and not subscription.is_active:
            subscription.is_active = True
            subscription.disabled_at = None
            subscription.disabled_reason = None
            subscription.failure_count = 0
        elif changes.get("is_active") is False and subscription.is_active:
            subscription.is_active = False
            subscription.disabled_at = datetime.now(UTC)
            subscription.disabled_reason = "disabled by its owner"
        subscription.updated_at = datetime.now(UTC)
        self.session.add(subscription)
        await self.session.flush()
        return subscription

    @staticmethod
    def _set_rate_limit(subscription: Subscription, changes: dict[str, Any]) -> None:
        """A null rate removes the limit and its burst; a burst needs a rate (given now or
        set before). The bucket follows in the database (migration 0021's trigger)."""
        rate = changes.get("rate_limit_per_second", subscription.rate_limit_per_second)
        burst = changes.get("rate_limit_burst", subscription.rate_limit_burst)
        if rate is None:
            if changes.get("rate_limit_burst") is not None:
                raise BurstWithoutRateLimit()
            burst = None
        subscription.rate_limit_per_second = rate
        subscription.rate_limit_burst = burst

    async def delete(self, owner: str, subscription_id: uuid.UUID) -> None:
        subscription = await self.subscriptions.get_owned_for_update(subscription_id, owner)
        if subscription is None:
            raise SubscriptionNotFound()
        await self.subscriptions.delete(subscription)

    # --- retry schedule and timeout in effect (issue 32) -----------------------------------

    async def in_effect(self, owner: str, rows: Sequence[Subscription]) -> list[InEffect]:
        """Each of `owner`'s `rows`' retry schedule and timeout in effect (its own, else the
        owner's default, else the service's), the owner's defaults read once."""
        schedule, timeout = await self.subscriptions.owner_defaults(owner)
        return [
            in_effect(
                row.retry_schedule,
                row.timeout_seconds,
                schedule,
                timeout,
                self.settings.retry_schedule_seconds,
                self.settings.delivery_timeout_seconds,
            )
            for row in rows
        ]

    async def defaults(self, owner: str) -> tuple[list[int] | None, int | None, InEffect]:
        """The owner's defaults as set, and what a subscription that sets neither gets."""
        schedule, timeout = await self.subscriptions.owner_defaults(owner)
        effect = in_effect(
            None,
            None,
            schedule,
            timeout,
            self.settings.retry_schedule_seconds,
            self.settings.delivery_timeout_seconds,
        )
        return schedule, timeout, effect

    async def set_defaults(
        self, owner: str, email: str | None, body: DeliveryDefaults
    ) -> tuple[list[int] | None, int | None, InEffect]:
        """Replace the owner's defaults; its subscriptions that set nothing follow them from
        their next attempt (the engine reads them with each batch it sends)."""
        await self.subscriptions.set_owner_defaults(
            owner, email, _seconds(body.retry_schedule), body.timeout_seconds
        )
        return await self.defaults(owner)

    async def rotate_secret(self, owner: str, subscription_id: uuid.UUID) -> Rotation:
        subscription = await self.subscriptions.get_owned_for_update(subscription_id, owner)
        if subscription is None:
            raise SubscriptionNotFound()
        now = datetime.now(UTC)
        subscription.secret_old = subscription.secret
        subscription.secret = generate_secret()
        subscription.secret_rotated_at = now
        subscription.updated_at = now
        self.session.add(subscription)
        await self.session.flush()
        return Rotation(
            subscription.secret,
            now + timedelta(seconds=self.settings.secret_transition_seconds),
        )


def _seconds(waits: list[str] | None) -> list[int] | None:
    return None if waits is None else schedule_seconds(waits)


def check_expressions(sources: dict[str, str | None]) -> None:
    """Compile each CEL field given (`filter`, `transform`): a 422 naming the first that does
    not, with its line and column. The worker compiles them again (once per subscription)."""
    kinds: dict[str, Kind] = {"filter": "filter", "transform": "transform"}
    for field, source in sources.items():
        if source is None or source == "":
            continue
        try:
            compile_expression(source, field=field, kind=kinds[field])
        except ExpressionError as exc:
            raise InvalidExpression(
                field, exc.position.line, exc.position.column, exc.message
            ) from None


def check_ordering(ordering: SubscriptionOrdering | None) -> None:
    """An ordering's key expression compiles (`InvalidExpression`, a 422 naming
    `ordering.key` and its line and column, when it does not)."""
    if ordering is not None and ordering.key is not None:
        try:
            compile_expression(ordering.key, field="ordering.key", kind="key")
        except ExpressionError as exc:
            raise InvalidExpression(
                "ordering.key", exc.position.line, exc.position.column, exc.message
            ) from None


def stored_ordering(ordering: SubscriptionOrdering | None) -> dict[str, Any] | None:
    """As the column holds it: null (unordered) or `{"key": <source> | null}`."""
    return None if ordering is None else {"key": ordering.key}


def example_choices(subscription: Subscription, catalog: Sequence[EventType]) -> list[EventType]:
    """The types an example may be sent of: active ones of `catalog` (what the principal may
    see) that the subscription receives, by name or through the wildcard."""
    wanted = set(subscription.events)
    return [t for t in catalog if t.is_active and (WILDCARD in wanted or t.name in wanted)]
