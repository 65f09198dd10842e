"""`/webhooks/subscriptions`: thin HTTP over SubscriptionService."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Query, Response, status
from servicekit.auth.dependencies import AdminPrincipal, ReadPrincipal, WritePrincipal
from servicekit.paging import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE

from webhook_hub.errors import (
    AUTH,
    BODY,
    EndpointNotAllowed,
    InvalidCursor,
    InvalidExpression,
    PersonalDataNotApproved,
    SubscriptionLimitReached,
    SubscriptionNotFound,
    UnknownEventTypes,
    declared,
)
from webhook_hub.subscriptions.dependencies import ProberDep, SubscriptionServiceDep
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
    responses=declared(
        *AUTH,
        *BODY,
        UnknownEventTypes,
        EndpointNotAllowed,
        PersonalDataNotApproved,
        SubscriptionLimitReached,
        InvalidExpression,
    ),
    summary="Create a subscription",
)
async def create_subscription(
    body: SubscriptionCreate,
    principal: WritePrincipal,
    service: SubscriptionServiceDep,
    prober: ProberDep,
) -> SubscriptionCreated:
    """Subscribe `endpoint_url` to `events` (active event type names, or `*` for all). The
    subscription gets a fresh 32-character signing `secret`, shown only here and on rotation,
    and a `webhook.test` event is queued to it. The endpoint is probed (an HTTP HEAD; any
    answer counts as reachable) after the subscription is committed: the result is reported
    in `probe` and never prevents the creation. An optional CEL `filter` (boolean) keeps
    only the events it is true of, and an optional CEL `transform` sends its result in place
    of the event's `data`; one that does not compile is a 422 naming the field, line and
    column."""
    subscription, _ = await service.create(principal.owner, principal.email, body)
    [effect] = await service.in_effect(principal.owner, [subscription])
    # The probe may wait its whole timeout on a slow endpoint: commit first, so no database
    # transaction (nor pooled connection) is held open meanwhile.
    await service.commit()
    probe = await prober.probe(subscription.endpoint_url)
    return SubscriptionCreated(
        **SubscriptionRead.of(subscription, effect).model_dump(),
        secret=subscription.secret,
        test_sent=True,
        probe=probe,
    )


@router.get(
    "",
    response_model=SubscriptionList,
    responses=declared(*AUTH, InvalidCursor),
    summary="List your subscriptions",
)
async def list_subscriptions(
    principal: ReadPrincipal,
    service: SubscriptionServiceDep,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = DEFAULT_PAGE_SIZE,
    cursor: Annotated[str | None, Query(max_length=500)] = None,
    is_active: bool | None = None,
    event_type: Annotated[str | None, Query(max_length=200)] = None,
) -> SubscriptionList:
    """The calling owner's subscriptions, newest first, `limit` per page; pass `next_cursor`
    back as `cursor` for the next page. `is_active` and `event_type` (subscriptions that would
    receive it, `*` included) filter."""
    page = await service.page(
        principal.owner, limit=limit, cursor=cursor, is_active=is_active, event_type=event_type
    )
    effects = await service.in_effect(principal.owner, page.items)
    return SubscriptionList(
        data=[SubscriptionRead.of(r, e) for r, e in zip(page.items, effects, strict=True)],
        next_cursor=page.next_cursor,
    )


@router.get(
    "/{subscription_id}",
    response_model=SubscriptionRead,
    responses=declared(*AUTH, SubscriptionNotFound),
    summary="Get a subscription",
)
async def get_subscription(
    subscription_id: uuid.UUID, principal: ReadPrincipal, service: SubscriptionServiceDep
) -> SubscriptionRead:
    """One of the caller's subscriptions (its secret is never shown again); another owner's
    is a 404. `retry_schedule` is what the subscription sets (null: not set); `in_effect`
    is what its next attempt uses and where that comes from."""
    subscription = await service.get(principal.owner, subscription_id)
    [effect] = await service.in_effect(principal.owner, [subscription])
    return SubscriptionRead.of(subscription, effect)


@router.patch(
    "/{subscription_id}",
    response_model=SubscriptionRead,
    responses=declared(
        *AUTH,
        *BODY,
        SubscriptionNotFound,
        UnknownEventTypes,
        EndpointNotAllowed,
        PersonalDataNotApproved,
        InvalidExpression,
    ),
    summary="Update a subscription",
)
async def update_subscription(
    subscription_id: uuid.UUID,
    body: SubscriptionUpdate,
    principal: WritePrincipal,
    service: SubscriptionServiceDep,
) -> SubscriptionRead:
    """Change any of `endpoint_url`, `events`, `description`, `headers`, `timeout_seconds`,
    `retry_schedule`, `filter`, `transform`, `rate_limit_per_second`, `rate_limit_burst`;
    absent fields stay, and `timeout_seconds` or `retry_schedule` named null is unset (your
    default, else the service's, applies again); a null rate limit removes the limit and its
    burst. `is_active: false` disables it; `is_active: true` re-enables a disabled one and
    resets its failure count. The same checks as creation apply (a `filter` or `transform`
    that does not compile is a 422 naming the field, line and column; `null` removes one)."""
    subscription = await service.update(principal.owner, subscription_id, body)
    [effect] = await service.in_effect(principal.owner, [subscription])
    return SubscriptionRead.of(subscription, effect)


@router.delete(
    "/{subscription_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    responses=declared(*AUTH, SubscriptionNotFound),
    summary="Delete a subscription",
)
async def delete_subscription(
    subscription_id: uuid.UUID, principal: AdminPrincipal, service: SubscriptionServiceDep
) -> None:
    """Delete it with its delivery log (admin level); pending deliveries are dropped."""
    await service.delete(principal.owner, subscription_id)


@router.post(
    "/{subscription_id}/test",
    response_model=TestQueued,
    status_code=status.HTTP_202_ACCEPTED,
    responses=declared(*AUTH, SubscriptionNotFound),
    summary="Send a test event",
)
async def send_test_event(
    subscription_id: uuid.UUID, principal: WritePrincipal, service: SubscriptionServiceDep
) -> TestQueued:
    """Queue a `webhook.test` event to the subscription; follow it in the delivery log with
    `GET /webhooks/deliveries/{delivery_id}`."""
    subscription = await service.get(principal.owner, subscription_id)
    delivery = await service.queue_test(subscription)
    return TestQueued(delivery_id=delivery.id, test_sent=True)


@router.post(
    "/{subscription_id}/rotate-secret",
    response_model=SecretRotated,
    responses=declared(*AUTH, SubscriptionNotFound),
    summary="Rotate the signing secret",
)
async def rotate_secret(
    subscription_id: uuid.UUID, principal: WritePrincipal, service: SubscriptionServiceDep
) -> SecretRotated:
    """Replace the secret. For 10 minutes (`valid_until`) every delivery is signed with both
    the new and the previous secret, so receivers can switch without losing a delivery."""
    rotation = await service.rotate_secret(principal.owner, subscription_id)
    return SecretRotated(
        secret=rotation.secret, valid_until=rotation.valid_until, note=ROTATION_NOTE
    )
