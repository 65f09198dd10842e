"""`PUT /webhooks/consumers/{owner}/personal-data-approval`: an operator approves an owner for
event types of personal data (as `webhook-hub consumers approve-personal-data` does)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path
from pydantic import BaseModel, ConfigDict
from servicekit.auth.api_keys import AccessLevel
from servicekit.auth.dependencies import Principal, require_level

from webhook_hub.dependencies import ConsumerServiceDep
from webhook_hub.errors import AUTH, BODY, declared

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
