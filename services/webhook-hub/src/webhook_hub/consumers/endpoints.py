"""`PUT /webhooks/consumers/{owner}/personal-data-approval`: an operator approves an owner for
event types of personal data (as `webhook-hub consumers approve-personal-data` does)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path
from pydantic import BaseModel, ConfigDict
from servicekit.auth.api_keys import AccessLevel
from servicekit.auth.dependencies import Principal, ReadPrincipal, WritePrincipal, require_level

from webhook_hub.consumers.dependencies import ConsumerServiceDep
from webhook_hub.errors import AUTH, BODY, declared
from webhook_hub.subscriptions.dependencies import SubscriptionServiceDep
from webhook_hub.subscriptions.retry_settings import InEffect, schedule_text
from webhook_hub.subscriptions.schemas import DeliveryDefaults, DeliveryDefaultsRead, InEffectRead

router = APIRouter(prefix="/consumers", tags=["consumers"])
OperatorPrincipal = Annotated[Principal, Depends(require_level(AccessLevel.OPERATOR))]


class PersonalDataApproval(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"approved": True}]})

    approved: bool


class PersonalDataApprovalRead(PersonalDataApproval):
    model_config = ConfigDict(json_schema_extra={"examples": [{"owner": "acme", "approved": True}]})

    owner: str


@router.put(
    "/{owner}/personal-data-approval",
    response_model=PersonalDataApprovalRead,
    responses=declared(*AUTH, *BODY),
    summary="Approve an owner for personal data",
)
async def set_personal_data_approval(
    owner: Annotated[str, Path(min_length=1, max_length=200)],
    body: PersonalDataApproval,
    principal: OperatorPrincipal,
    service: ConsumerServiceDep,
) -> PersonalDataApprovalRead:
    """Operator keys only. Approved owners may subscribe to, and receive, event types of
    personal data; withdrawing the approval stops their deliveries of such types."""
    await service.set_personal_data_approval(owner, body.approved)
    return PersonalDataApprovalRead(owner=owner, approved=body.approved)


# --- the caller's own delivery defaults (issue 32) ------------------------------------------


def _defaults_read(
    schedule: list[int] | None, timeout: int | None, effect: InEffect
) -> DeliveryDefaultsRead:
    return DeliveryDefaultsRead(
        retry_schedule=schedule_text(schedule),
        timeout_seconds=timeout,
        in_effect=InEffectRead.of(effect),
    )


@router.get(
    "/me/defaults",
    response_model=DeliveryDefaultsRead,
    responses=declared(*AUTH),
    summary="Your delivery defaults",
)
async def get_delivery_defaults(
    principal: ReadPrincipal, service: SubscriptionServiceDep
) -> DeliveryDefaultsRead:
    """The retry schedule and timeout your subscriptions get when they set none (null: not
    set), and `in_effect`: your defaults, else the service's."""
    return _defaults_read(*await service.defaults(principal.owner))


@router.put(
    "/me/defaults",
    response_model=DeliveryDefaultsRead,
    responses=declared(*AUTH, *BODY),
    summary="Set your delivery defaults",
)
async def set_delivery_defaults(
    body: DeliveryDefaults, principal: WritePrincipal, service: SubscriptionServiceDep
) -> DeliveryDefaultsRead:
    """Replace both defaults (an absent or null field is not set: the service's applies).
    Your subscriptions that set no `retry_schedule` (or `timeout_seconds`) follow them from
    their next attempt; those that set their own keep theirs."""
    return _defaults_read(*await service.set_defaults(principal.owner, principal.email, body))
