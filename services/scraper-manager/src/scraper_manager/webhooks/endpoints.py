"""`/api/v1/webhooks`: a client's run webhooks. webhook-hub stores and delivers them (one
delivery engine, one signing scheme); we ask it over NATS and keep a record of what we asked."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import nats.errors
from fastapi import APIRouter, Request, Response, status
from pydantic import BaseModel, ConfigDict, Field, field_validator
from servicekit.auth.dependencies import AdminPrincipal, ReadPrincipal, WritePrincipal
from servicekit.errors import NotFound, ServiceUnavailable, UnprocessableEntity
from servicekit.runtime import ServiceRuntime
from servicekit.web.session import SessionDep
from sqlmodel import col, select

from scraper_manager.errors import AUTH_ERRORS, INVALID, NOT_FOUND
from scraper_manager.events import RUN_EVENT_TYPES
from scraper_manager.models import ScraperWebhook
from scraper_manager.scrapers.schemas import check_url
from scraper_manager.settings import Settings

router = APIRouter(prefix="/webhooks", tags=["webhooks"])
SOURCE = "scraper-manager"


class WebhookCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str = Field(max_length=2048)
    events: list[str] = Field(min_length=1, max_length=len(RUN_EVENT_TYPES))

    _url = field_validator("url")(check_url)


class WebhookOut(BaseModel):
    id: str
    url: str
    events: list[str]
    created_at: datetime


class WebhookCreated(WebhookOut):
    secret: str = Field(description="Verifies the signatures (Standard Webhooks); shown once")


class UnknownRunEvents(UnprocessableEntity):
    code = "unknown_event_types"


async def ask_hub(request: Request, action: str, payload: dict[str, Any]) -> dict[str, Any]:
    runtime: ServiceRuntime = request.app.state.runtime
    settings: Settings = request.app.state.settings
    try:
        reply = await runtime.nats.client.request(
            f"hub.subscriptions.{action}",
            json.dumps({"source": SOURCE, **payload}).encode(),
            timeout=settings.hub_request_timeout_seconds,
        )
    except (nats.errors.NoRespondersError, nats.errors.TimeoutError) as exc:
        raise ServiceUnavailable("webhook-hub did not answer; try again shortly") from exc
    answer: dict[str, Any] = json.loads(reply.data)
    return answer


@router.post(
    "",
    response_model=WebhookCreated,
    status_code=status.HTTP_201_CREATED,
    responses={**AUTH_ERRORS, **INVALID},
)
async def register_webhook(
    body: WebhookCreate, principal: WritePrincipal, session: SessionDep, request: Request
) -> WebhookCreated:
    unknown = sorted(set(body.events) - set(RUN_EVENT_TYPES))
    if unknown:
        raise UnknownRunEvents(
            f"Unknown event types: {', '.join(unknown)}",
            extra={"invalid_events": unknown, "allowed": list(RUN_EVENT_TYPES)},
        )
    answer = await ask_hub(
        request,
        "create",
        {
            "tenant": principal.owner,
            "endpoint_url": body.url,
            "events": body.events,
            "email": principal.email,
        },
    )
    if not answer.get("ok"):
        raise UnprocessableEntity(str(answer.get("error", "webhook-hub refused the webhook")))
    record = answer["subscription"]
    webhook = ScraperWebhook(
        id=record["id"], owner=principal.owner, url=body.url, events=body.events
    )
    session.add(webhook)
    await session.flush()
    return WebhookCreated(
        id=webhook.id,
        url=webhook.url,
        events=webhook.events,
        created_at=webhook.created_at,
        secret=record["secret"],
    )


@router.get("", response_model=list[WebhookOut], responses=AUTH_ERRORS)
async def list_webhooks(principal: ReadPrincipal, session: SessionDep) -> list[WebhookOut]:
    rows = (
        await session.exec(
            select(ScraperWebhook)
            .where(ScraperWebhook.owner == principal.owner)
            .order_by(col(ScraperWebhook.created_at))
        )
    ).all()
    return [WebhookOut(id=r.id, url=r.url, events=r.events, created_at=r.created_at) for r in rows]


@router.delete(
    "/{webhook_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    responses={**AUTH_ERRORS, **NOT_FOUND},
)
async def delete_webhook(
    webhook_id: str, principal: AdminPrincipal, session: SessionDep, request: Request
) -> None:
    webhook = await session.get(ScraperWebhook, webhook_id)
    if webhook is None or webhook.owner != principal.owner:
        raise NotFound("Webhook not found")
    answer = await ask_hub(request, "delete", {"tenant": principal.owner, "id": webhook_id})
    if not answer.get("ok") and answer.get("status") != 404:
        raise ServiceUnavailable(str(answer.get("error", "webhook-hub could not delete it")))
    await session.delete(webhook)
