"""NATS request/reply for other services: `hub.subscriptions.create`, `.list`, `.delete`,
`.deliveries` (read only: the last deliveries' outcomes of one subscription) and
`.portal-link` (a one-time portal link for a tenant the service subscribed).

A service (scraper-manager) subscribes a tenant of its own to event types it emits. The
subscription belongs to that tenant and is delivered by the same engine, signed the same way.
Requests carry `source` (the asking service), `tenant` and the fields of the HTTP API.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import timedelta

import structlog
from nats.aio.msg import Msg
from pydantic import BaseModel, ValidationError
from servicekit.auth.api_keys import AccessLevel
from servicekit.contracts.webhook_hub import (
    QUEUE_GROUP,
    SUBJECT_PREFIX,
    Created,
    CreateSubscription,
    Deleted,
    DeleteSubscription,
    DeliveriesListed,
    DeliveryRecord,
    ListDeliveries,
    Listed,
    ListSubscriptions,
    NewSubscriptionRecord,
    PortalLinkIssued,
    PortalLinkRequest,
    Refused,
    SubscriptionRecord,
)
from servicekit.errors import NotFound, ServiceError, UnprocessableEntity
from servicekit.runtime import ServiceRuntime
from servicekit.worker import WorkerLoop

from webhook_hub.deliveries.service import DeliveryService
from webhook_hub.delivery_engine.endpoint_policy import EndpointGuard
from webhook_hub.errors import TenantNotSubscribed
from webhook_hub.portal.service import portal_links
from webhook_hub.settings import Settings
from webhook_hub.subscriptions.schemas import SubscriptionCreate, record_fields
from webhook_hub.subscriptions.service import SubscriptionService

logger = structlog.get_logger(__name__)


class SubscriptionRequests:
    def __init__(self, runtime: ServiceRuntime, settings: Settings) -> None:
        self.runtime = runtime
        self.settings = settings
        self.guard = EndpointGuard(settings.allowed_networks, strict=settings.ssrf_guard_enabled)

    async def create(self, request: CreateSubscription) -> Created:
        body = SubscriptionCreate(
            endpoint_url=request.endpoint_url,
            events=request.events,
            description=request.description,
            headers=request.headers,
            retry_schedule=request.retry_schedule,
            timeout_seconds=request.timeout_seconds,
            filter=request.filter,
            transform=request.transform,
            rate_limit_per_second=request.rate_limit_per_second,
            rate_limit_burst=request.rate_limit_burst,
            ordering=request.ordering,
        )
        async with self.runtime.session_factory() as session, session.begin():
            service = SubscriptionService(session, self.settings, self.guard)
            subscription, _ = await service.create(
                request.tenant, request.email, body, source=request.source
            )
            [effect] = await service.in_effect(request.tenant, [subscription])
            record = NewSubscriptionRecord(
                **record_fields(subscription, effect), secret=subscription.secret
            )
        return Created(subscription=record)

    async def list(self, request: ListSubscriptions) -> Listed:
        async with self.runtime.session_factory() as session:
            service = SubscriptionService(session, self.settings, self.guard)
            page = await service.page(
                request.tenant,
                limit=1000,
                cursor=None,
                is_active=None,
                event_type=None,
                source=request.source,
            )
            effects = await service.in_effect(request.tenant, page.items)
        return Listed(
            subscriptions=[
                SubscriptionRecord(**record_fields(row, effect))
                for row, effect in zip(page.items, effects, strict=True)
            ]
        )

    async def delete(self, request: DeleteSubscription) -> Deleted:
        async with self.runtime.session_factory() as session, session.begin():
            service = SubscriptionService(session, self.settings, self.guard)
            await self._made_by_source(service, request.tenant, request.id, request.source)
            await service.delete(request.tenant, request.id)
        return Deleted()

    async def deliveries(self, request: ListDeliveries) -> DeliveriesListed:
        async with self.runtime.session_factory() as session:
            service = SubscriptionService(session, self.settings, self.guard)
            await self._made_by_source(service, request.tenant, request.id, request.source)
            page = await DeliveryService(session).page(
                request.tenant,
                request.id,
                limit=request.limit,
                cursor=None,
                status=None,
                event_type=None,
            )
        return DeliveriesListed(
            deliveries=[
                DeliveryRecord.model_validate(row, from_attributes=True) for row in page.items
            ]
        )

    async def portal_link(self, request: PortalLinkRequest) -> PortalLinkIssued:
        """Issued as `POST /webhooks/portal-links` and `webhook-hub portal-link` issue theirs,
        for a tenant that holds a subscription `source` made; no key to end with (as the
        operator's CLI link): the asking service vouches for the person it hands it to."""
        async with self.runtime.session_factory() as session, session.begin():
            service = SubscriptionService(session, self.settings, self.guard)
            made = await service.page(
                request.tenant,
                limit=1,
                cursor=None,
                is_active=None,
                event_type=None,
                source=request.source,
            )
            if not made.items:
                raise TenantNotSubscribed()
            issued = await portal_links(session).issue(
                request.tenant,
                AccessLevel(request.level),
                base_url=self.settings.public_url or f"http://127.0.0.1:{self.settings.port}",
                ttl=timedelta(seconds=request.ttl_seconds),
                api_key_id=None,
            )
        return PortalLinkIssued(url=issued.url, expires_at=issued.expires_at)

    @staticmethod
    async def _made_by_source(
        service: SubscriptionService, tenant: str, subscription_id: uuid.UUID, source: str
    ) -> None:
        """The tenant's subscription made by `source`; any other id is 404 alike."""
        subscription = await service.get(tenant, subscription_id)
        if subscription.created_by_source != source:
            raise NotFound("Subscription not found")

    async def handle(self, msg: Msg) -> None:
        action = msg.subject.removeprefix(SUBJECT_PREFIX)
        reply: BaseModel
        try:
            payload = json.loads(msg.data or b"{}")
            if action == "create":
                reply = await self.create(CreateSubscription.model_validate(payload))
            elif action == "list":
                reply = await self.list(ListSubscriptions.model_validate(payload))
            elif action == "delete":
                reply = await self.delete(DeleteSubscription.model_validate(payload))
            elif action == "deliveries":
                reply = await self.deliveries(ListDeliveries.model_validate(payload))
            elif action == "portal-link":
                reply = await self.portal_link(PortalLinkRequest.model_validate(payload))
            else:
                reply = Refused.of(NotFound("unknown action"))
        except (ValidationError, ValueError) as exc:
            reply = Refused.of(UnprocessableEntity(str(exc)))
        except ServiceError as exc:
            reply = Refused.of(exc)
        except Exception as exc:
            logger.exception("subscription request failed", action=action)
            reply = Refused.of(ServiceError(repr(exc)[:200]))
        if msg.reply:
            await msg.respond(reply.model_dump_json().encode())


def subscription_requests_loop(settings: Settings) -> WorkerLoop:
    async def run(runtime: ServiceRuntime, stop: asyncio.Event) -> None:
        handlers = SubscriptionRequests(runtime, settings)
        subscription = await runtime.nats.client.subscribe(
            SUBJECT_PREFIX + "*", queue=QUEUE_GROUP, cb=handlers.handle
        )
        try:
            await stop.wait()
        finally:
            await subscription.unsubscribe()

    return run
