"""The delivery log: per-subscription listing, one delivery with its attempts, retry, recover."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Query, status
from servicekit.auth.dependencies import ReadPrincipal, WritePrincipal
from servicekit.paging import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE

from webhook_hub.deliveries.dependencies import DeliveryServiceDep
from webhook_hub.deliveries.schemas import (
    AttemptRead,
    DeliveryDetail,
    DeliveryList,
    DeliveryRead,
    Recovered,
    RecoverRequest,
)
from webhook_hub.errors import (
    AUTH,
    BODY,
    DeliveryNotFound,
    InvalidCursor,
    SubscriptionNotFound,
    declared,
)
from webhook_hub.models import DeliveryStatus

router = APIRouter(tags=["deliveries"])


@router.get(
    "/subscriptions/{subscription_id}/deliveries",
    response_model=DeliveryList,
    responses=declared(*AUTH, SubscriptionNotFound, InvalidCursor),
    summary="List a subscription's deliveries",
)
async def list_deliveries(
    subscription_id: uuid.UUID,
    principal: ReadPrincipal,
    service: DeliveryServiceDep,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = DEFAULT_PAGE_SIZE,
    cursor: Annotated[str | None, Query(max_length=500)] = None,
    status: DeliveryStatus | None = None,
    event_type: Annotated[str | None, Query(max_length=200)] = None,
) -> DeliveryList:
    """The subscription's delivery log, newest first, `limit` per page (pass `next_cursor`
    back as `cursor`); `status` (`pending`, `succeeded`, `failed`) and `event_type` filter."""
    page = await service.page(
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
    responses=declared(*AUTH, DeliveryNotFound),
    summary="Get a delivery with its attempt log",
)
async def get_delivery(
    delivery_id: uuid.UUID, principal: ReadPrincipal, service: DeliveryServiceDep
) -> DeliveryDetail:
    """One delivery of the caller's subscriptions: its event, status, and `attempt_log`, one
    entry per HTTP attempt (oldest first) with the status code, the first 4 KiB of the
    response, the duration and any connection error."""
    delivery, attempts = await service.get(principal.owner, delivery_id)
    return DeliveryDetail(
        **DeliveryRead.of(delivery).model_dump(),
        attempt_log=[AttemptRead.of(attempt) for attempt in attempts],
    )


@router.post(
    "/deliveries/{delivery_id}/retry",
    response_model=DeliveryRead,
    status_code=status.HTTP_202_ACCEPTED,
    responses=declared(*AUTH, DeliveryNotFound),
    summary="Retry a delivery now",
)
async def retry_delivery(
    delivery_id: uuid.UUID, principal: WritePrincipal, service: DeliveryServiceDep
) -> DeliveryRead:
    """Attempt the delivery again now, whatever its status (a succeeded one is sent again,
    with the same `webhook-id`); its attempt log is kept."""
    return DeliveryRead.of(await service.retry(principal.owner, delivery_id))


@router.post(
    "/subscriptions/{subscription_id}/recover",
    response_model=Recovered,
    status_code=status.HTTP_202_ACCEPTED,
    responses=declared(*AUTH, *BODY, SubscriptionNotFound),
    summary="Redeliver failed deliveries since a moment",
)
async def recover_failed(
    subscription_id: uuid.UUID,
    body: RecoverRequest,
    principal: WritePrincipal,
    service: DeliveryServiceDep,
) -> Recovered:
    """Schedule again every `failed` delivery of the subscription created at or after
    `since`, an ISO 8601 date-time with a UTC offset (`2026-11-22T10:00:00Z`); anything else
    is a 422 naming the format."""
    count = await service.recover(principal.owner, subscription_id, body.since)
    return Recovered(recovered=count)
