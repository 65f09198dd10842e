"""The delivery log: per-subscription listing, one delivery with its attempts, retry, recover."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Query, status
from servicekit.auth.dependencies import ReadPrincipal, WritePrincipal
from servicekit.paging import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE
from servicekit.web.session import SessionDep

from webhook_hub.deliveries.schemas import (
    AttemptRead,
    DeliveryDetail,
    DeliveryList,
    DeliveryRead,
    DeliveryStatus,
    Recovered,
    RecoverRequest,
)
from webhook_hub.deliveries.service import DeliveryService
from webhook_hub.errors import AUTH_ERRORS, BAD_CURSOR, INVALID, NOT_FOUND

router = APIRouter(tags=["deliveries"])


@router.get(
    "/subscriptions/{subscription_id}/deliveries",
    response_model=DeliveryList,
    responses={**AUTH_ERRORS, **NOT_FOUND, **BAD_CURSOR},
)
async def list_deliveries(
    subscription_id: uuid.UUID,
    principal: ReadPrincipal,
    session: SessionDep,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = DEFAULT_PAGE_SIZE,
    cursor: Annotated[str | None, Query(max_length=500)] = None,
    status: DeliveryStatus | None = None,
    event_type: Annotated[str | None, Query(max_length=200)] = None,
) -> DeliveryList:
    page = await DeliveryService(session).page(
        principal.owner,
        subscription_id,
        limit=limit,
        cursor=cursor,
        status=status,
        event_type=event_type,
    )
    return DeliveryList(
        data=[DeliveryRead.of(row) for row in page.items], next_cursor=page.next_cursor
    )


@router.get(
    "/deliveries/{delivery_id}",
    response_model=DeliveryDetail,
    responses={**AUTH_ERRORS, **NOT_FOUND},
)
async def get_delivery(
    delivery_id: uuid.UUID, principal: ReadPrincipal, session: SessionDep
) -> DeliveryDetail:
    delivery, attempts = await DeliveryService(session).get(principal.owner, delivery_id)
    return DeliveryDetail(
        **DeliveryRead.of(delivery).model_dump(),
        attempt_log=[AttemptRead.of(attempt) for attempt in attempts],
    )


@router.post(
    "/deliveries/{delivery_id}/retry",
    response_model=DeliveryRead,
    status_code=status.HTTP_202_ACCEPTED,
    responses={**AUTH_ERRORS, **NOT_FOUND},
)
async def retry_delivery(
    delivery_id: uuid.UUID, principal: WritePrincipal, session: SessionDep
) -> DeliveryRead:
    return DeliveryRead.of(await DeliveryService(session).retry(principal.owner, delivery_id))


@router.post(
    "/subscriptions/{subscription_id}/recover",
    response_model=Recovered,
    status_code=status.HTTP_202_ACCEPTED,
    responses={**AUTH_ERRORS, **NOT_FOUND, **INVALID},
)
async def recover_failed(
    subscription_id: uuid.UUID,
    body: RecoverRequest,
    principal: WritePrincipal,
    session: SessionDep,
) -> Recovered:
    count = await DeliveryService(session).recover(principal.owner, subscription_id, body.since)
    return Recovered(recovered=count)
