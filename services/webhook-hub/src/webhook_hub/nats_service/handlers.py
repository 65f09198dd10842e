"""NATS request/reply for other services: `hub.subscriptions.create`, `.list`, `.delete`.

A service (scraper-manager) subscribes a tenant of its own to event types it emits. The
subscription belongs to that tenant and is delivered by the same engine, signed the same way.
Requests carry `source` (the asking service), `tenant` and the fields of the HTTP API.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import structlog
from nats.aio.msg import Msg
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from servicekit.errors import ServiceError
from servicekit.runtime import ServiceRuntime
from servicekit.worker import WorkerLoop

from webhook_hub.settings import Settings
from webhook_hub.subscriptions.endpoint_policy import EndpointGuard
from webhook_hub.subscriptions.schemas import SubscriptionCreate, SubscriptionRead
from webhook_hub.subscriptions.service import SubscriptionService

logger = structlog.get_logger(__name__)
SUBJECT_PREFIX = "hub.subscriptions."
QUEUE_GROUP = "webhook-hub"


class TenantRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str = Field(min_length=1, max_length=200)
    tenant: str = Field(min_length=1, max_length=200)


class CreateRequest(TenantRequest):
    endpoint_url: str
    events: list[str]
    description: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    email: str | None = Field(default=None, max_length=320)


class ListRequest(TenantRequest):
    """`{source, tenant}`: the tenant's subscriptions made by that source."""


class DeleteRequest(TenantRequest):
    id: uuid.UUID


def _error(exc: ServiceError) -> dict[str, Any]:
    return {
        "ok": False,
        "status": exc.status_code,
        "code": exc.code,
        "error": exc.message,
        **exc.extra,
    }


class SubscriptionRequests:
    def __init__(self, runtime: ServiceRuntime, settings: Settings) -> None:
        self.runtime = runtime
        self.settings = settings
        self.guard = EndpointGuard(settings.allowed_networks)

    async def create(self, request: CreateRequest) -> dict[str, Any]:
        body = SubscriptionCreate(
            endpoint_url=request.endpoint_url,
            events=request.events,
            description=request.description,
            headers=request.headers,
        )
        async with self.runtime.session_factory() as session, session.begin():
            service = SubscriptionService(session, self.settings, self.guard)
            subscription, _ = await service.create(
                request.tenant, request.email, body, source=request.source
            )
            record = SubscriptionRead.of(subscription).model_dump(mode="json")
            record["secret"] = subscription.secret
        return {"ok": True, "subscription": record}

    async def list(self, request: ListRequest) -> dict[str, Any]:
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
        return {
            "ok": True,
            "subscriptions": [
                SubscriptionRead.of(row).model_dump(mode="json") for row in page.items
            ],
        }

    async def delete(self, request: DeleteRequest) -> dict[str, Any]:
        async with self.runtime.session_factory() as session, session.begin():
            service = SubscriptionService(session, self.settings, self.guard)
            subscription = await service.get(request.tenant, request.id)
            if subscription.created_by_source != request.source:
                return {
                    "ok": False,
                    "status": 404,
                    "code": "not_found",
                    "error": "Subscription not found",
                }
            await service.delete(request.tenant, request.id)
        return {"ok": True}

    async def handle(self, msg: Msg) -> None:
        action = msg.subject.removeprefix(SUBJECT_PREFIX)
        try:
            payload = json.loads(msg.data or b"{}")
            if action == "create":
                reply = await self.create(CreateRequest.model_validate(payload))
            elif action == "list":
                reply = await self.list(ListRequest.model_validate(payload))
            elif action == "delete":
                reply = await self.delete(DeleteRequest.model_validate(payload))
            else:
                reply = {"ok": False, "status": 404, "code": "not_found", "error": "unknown action"}
        except (ValidationError, ValueError) as exc:
            reply = {"ok": False, "status": 422, "code": "validation_error", "error": str(exc)}
        except ServiceError as exc:
            reply = _error(exc)
        except Exception as exc:
            logger.exception("subscription request failed", action=action)
            reply = {"ok": False, "status": 500, "code": "internal_error", "error": repr(exc)[:200]}
        if msg.reply:
            await msg.respond(json.dumps(reply).encode())


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
