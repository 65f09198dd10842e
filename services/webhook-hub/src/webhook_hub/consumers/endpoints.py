"""`PUT /webhooks/consumers/{owner}/personal-data-approval`: an operator approves an owner for
event types of personal data (as `webhook-hub consumers approve-personal-data` does)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path
from pydantic import BaseModel, ConfigDict
from servicekit.auth.api_keys import AccessLevel
from servicekit.auth.dependencies import Principal, require_level
from servicekit.web.session import SessionDep

from webhook_hub.errors import AUTH_ERRORS, INVALID
from webhook_hub.subscriptions.repository import SubscriptionRepository

router = APIRouter(prefix="/consumers", tags=["consumers"])
OperatorPrincipal = Annotated[Principal, Depends(require_level(AccessLevel.OPERATOR))]


class PersonalDataApproval(BaseModel):
    model_config = ConfigDict(extra="forbid")

    approved: bool


class PersonalDataApprovalRead(PersonalDataApproval):
    owner: str


@router.put(
    "/{owner}/personal-data-approval",
    response_model=PersonalDataApprovalRead,
    responses={**AUTH_ERRORS, **INVALID},
)
async def set_personal_data_approval(
    owner: Annotated[str, Path(min_length=1, max_length=200)],
    body: PersonalDataApproval,
    principal: OperatorPrincipal,
    session: SessionDep,
) -> PersonalDataApprovalRead:
    """Operator keys only. Approved owners may subscribe to, and receive, event types of
    personal data; withdrawing the approval stops their deliveries of such types."""
    await SubscriptionRepository(session).set_personal_data_approval(owner, body.approved)
    return PersonalDataApprovalRead(owner=owner, approved=body.approved)
