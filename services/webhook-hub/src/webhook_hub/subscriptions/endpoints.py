"""`/webhooks/subscriptions`: thin HTTP over SubscriptionService."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Query, Response, status
from servicekit.auth.dependencies import AdminPrincipal, ReadPrincipal, WritePrincipal
from servicekit.paging import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE

from webhook_hub.dependencies import ProberDep, SubscriptionServiceDep
from webhook_hub.errors import AUTH_ERRORS, BAD_CURSOR, CONFLICT, INVALID, NOT_FOUND
from webhook_hub.subscriptions.schemas import (
    SecretRotated,
    SubscriptionCreate,
    SubscriptionCreated,
    SubscriptionList,
    SubscriptionRead,
    SubscriptionUpdate,
    TestQueued,
)

router = APIRouter(prefix="/subscriptions", tags=["subscriptions"])
ROTATION_NOTE = (
    "Until valid_until every delivery carries two v1 signatures, one per secret, so a "
    "receiver holding either verifies; afterwards only the new secret signs."
)


@router.post(
    "",
    response_model=SubscriptionCreated,
    status_code=status.HTTP_201_CREATED,
    responses={**AUTH_ERRORS, **INVALID, **CONFLICT},
)
async def create_subscription(
    body: SubscriptionCreate,
    principal: WritePrincipal,
    service: SubscriptionServiceDep,
    prober: ProberDep,
) -> SubscriptionCreated:
    subscription, _ = await service.create(principal.owner, principal.email, body)
    probe = await prober.probe(subscription.endpoint_url)
    return SubscriptionCreated(
        **SubscriptionRead.of(subscription).model_dump(),
        secret=subscription.secret,
        test_sent=True,
        probe=probe,
    )


@router.get("", response_model=SubscriptionList, responses={**AUTH_ERRORS, **BAD_CURSOR})
async def list_subscriptions(
    principal: ReadPrincipal,
    service: SubscriptionServiceDep,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = DEFAULT_PAGE_SIZE,
    cursor: Annotated[str | None, Query(max_length=500)] = None,
    is_active: bool | None = None,
    event_type: Annotated[str | None, Query(max_length=200)] = None,
) -> SubscriptionList:
    page = await service.page(
        principal.owner, limit=limit, cursor=cursor, is_active=is_active, event_type=event_type
    )
    return SubscriptionList(
        data=[SubscriptionRead.of(r) for r in page.items], next_cursor=page.next_cursor
    )


@router.get(
    "/{subscription_id}", response_model=SubscriptionRead, responses={**AUTH_ERRORS, **NOT_FOUND}
)
async def get_subscription(
    subscription_id: uuid.UUID, principal: ReadPrincipal, service: SubscriptionServiceDep
) -> SubscriptionRead:
    return SubscriptionRead.of(await service.get(principal.owner, subscription_id))


@router.patch(
    "/{subscription_id}",
    response_model=SubscriptionRead,
    responses={**AUTH_ERRORS, **NOT_FOUND, **INVALID},
)
async def update_subscription(
    subscription_id: uuid.UUID,
    body: SubscriptionUpdate,
    principal: WritePrincipal,
    service: SubscriptionServiceDep,
) -> SubscriptionRead:
    return SubscriptionRead.of(await service.update(principal.owner, subscription_id, body))


@router.delete(
    "/{subscription_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    responses={**AUTH_ERRORS, **NOT_FOUND},
)
async def delete_subscription(
    subscription_id: uuid.UUID, principal: AdminPrincipal, service: SubscriptionServiceDep
) -> None:
    await service.delete(principal.owner, subscription_id)


@router.post(
    "/{subscription_id}/test",
    response_model=TestQueued,
    status_code=status.HTTP_202_ACCEPTED,
    responses={**AUTH_ERRORS, **NOT_FOUND},
)
async def send_test_event(
    subscription_id: uuid.UUID, principal: WritePrincipal, service: SubscriptionServiceDep
) -> TestQueued:
    subscription = await service.get(principal.owner, subscription_id)
    delivery = await service.queue_test(subscription)
    return TestQueued(delivery_id=delivery.id, test_sent=True)


@router.post(
    "/{subscription_id}/rotate-secret",
    response_model=SecretRotated,
    responses={**AUTH_ERRORS, **NOT_FOUND},
)
async def rotate_secret(
    subscription_id: uuid.UUID, principal: WritePrincipal, service: SubscriptionServiceDep
) -> SecretRotated:
    rotation = await service.rotate_secret(principal.owner, subscription_id)
    return SecretRotated(
        secret=rotation.secret, valid_until=rotation.valid_until, note=ROTATION_NOTE
    )
