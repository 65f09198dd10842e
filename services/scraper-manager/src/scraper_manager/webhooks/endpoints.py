"""`/api/v1/webhooks`: a client's run webhooks, thin HTTP over WebhookService. webhook-hub
stores and delivers them (one delivery engine, one signing scheme)."""

from __future__ import annotations

from fastapi import APIRouter, Response, status
from servicekit.auth.dependencies import AdminPrincipal, ReadPrincipal, WritePrincipal
from servicekit.contracts.webhook_hub import HubUnavailable

from scraper_manager.errors import (
    AUTH,
    RegistrationFailed,
    RequestInvalid,
    UnknownRunEvents,
    WebhookNotFound,
    WebhookRefused,
    declared,
)
from scraper_manager.webhooks.dependencies import WebhookServiceDep
from scraper_manager.webhooks.schemas import WebhookCreate, WebhookCreated, WebhookOut

router = APIRouter(prefix="/webhooks", tags=["webhooks"])


@router.post(
    "",
    response_model=WebhookCreated,
    status_code=status.HTTP_201_CREATED,
    summary="Register a webhook for run events",
    description=(
        "Asks webhook-hub to subscribe `url` to the given run events of this client's "
        "scrapers only. The hub signs (Standard Webhooks), retries and logs each delivery; "
        "`id` is its subscription id. The `secret` is shown only here. A failure part way "
        "answers 503 and leaves nothing registered."
    ),
    responses=declared(
        *AUTH, RequestInvalid, UnknownRunEvents, WebhookRefused, HubUnavailable, RegistrationFailed
    ),
)
async def register_webhook(
    body: WebhookCreate, principal: WritePrincipal, service: WebhookServiceDep
) -> WebhookCreated:
    return await service.register(principal.owner, principal.email, body)


@router.get(
    "",
    response_model=list[WebhookOut],
    summary="List webhooks",
    description="This client's registered webhooks, oldest first (no secrets).",
    responses=declared(*AUTH),
)
async def list_webhooks(principal: ReadPrincipal, service: WebhookServiceDep) -> list[WebhookOut]:
    return await service.list(principal.owner)


@router.delete(
    "/{webhook_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    summary="Delete a webhook",
    description="Deletes the subscription in webhook-hub, then our record; deliveries stop.",
    responses=declared(*AUTH, WebhookNotFound, WebhookRefused, HubUnavailable),
)
async def delete_webhook(
    webhook_id: str, principal: AdminPrincipal, service: WebhookServiceDep
) -> None:
    await service.delete(principal.owner, webhook_id)
