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

from webhook_hub.delivery_engine.store import DeliveryWrites
from webhook_hub.errors import (
    EndpointNotAllowed,
    InvalidExpression,
    PersonalDataNotApproved,
    SubscriptionLimitReached,
    SubscriptionNotFound,
    UnknownEventTypes,
)
from webhook_hub.event_types.repository import EventTypeRepository
from webhook_hub.events import TEST_EVENT_TYPE
from webhook_hub.expressions import ExpressionError, compile_expression
from webhook_hub.models import Delivery, EventType, Subscription
from webhook_hub.settings import Settings
from webhook_hub.subscriptions.endpoint_policy import EndpointGuard, EndpointRefused
from webhook_hub.subscriptions.repository import SubscriptionRepository
from webhook_hub.subscriptions.schemas import (
    EDITABLE_FIELDS,
    NULLABLE_FIELDS,
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
        await self.check_events(body.events, owner=owner, source=source)
        await self.check_endpoint(body.endpoint_url)
        check_ordering(body.ordering)
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
        if changes.get("events") is not None:
            await self.check_events(
                changes["events"], owner=owner, source=subscription.created_by_source
            )
        if changes.get("endpoint_url") is not None:
            await self.check_endpoint(changes["endpoint_url"])
        if "ordering" in changes:
            check_ordering(patch.ordering)
            changes["ordering"] = stored_ordering(patch.ordering)
        for field in EDITABLE_FIELDS:
            if field in changes and (changes[field] is not None or field in NULLABLE_FIELDS):
                setattr(subscription, field, changes[field])
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

    async def delete(self, owner: str, subscription_id: uuid.UUID) -> None:
        subscription = await self.subscriptions.get_owned_for_update(subscription_id, owner)
        if subscription is None:
            raise SubscriptionNotFound()
        await self.subscriptions.delete(subscription)

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
