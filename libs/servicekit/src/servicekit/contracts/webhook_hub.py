"""webhook-hub's NATS request/reply service,
`hub.subscriptions.{create,list,delete,deliveries,portal-link}`: the requests, the replies and a
small client. webhook-hub answers with these models and
scraper-manager asks with them, so the wire is written once.

Every request names `source` (the asking service) and `tenant` (the subscription's owner).
A reply is `{"ok": true, ...}` or `{"ok": false, "status", "code", "error", ...}`, where the
error's extra members (e.g. `invalid_events`) sit beside the others.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any, Literal, Protocol, TypeVar

import nats.errors
from nats.aio.client import Client as NatsClient
from pydantic import BaseModel, ConfigDict, Field

from servicekit.errors import ServiceError, ServiceUnavailable

SUBJECT_PREFIX = "hub.subscriptions."
QUEUE_GROUP = "webhook-hub"
Action = Literal["create", "list", "delete", "deliveries", "portal-link"]
# The most deliveries one `deliveries` request answers (a dashboard shows the last few).
MAX_DELIVERIES = 50
# A portal link's lifetime, as `webhook-hub portal-link` and `POST /webhooks/portal-links` take
# it (servicekit.web.pages.links's bounds, not imported: it loads the web framework).
PORTAL_LINK_MIN_TTL_SECONDS = 60
PORTAL_LINK_MAX_TTL_SECONDS = 24 * 3600
PORTAL_LINK_DEFAULT_TTL_SECONDS = 3600
# The levels a service may ask a portal link at: `admin` (deleting endpoints) is the owner's
# own key's or the operator's, never another service's to hand out.
PortalLevel = Literal["read", "write"]


def subject(action: Action) -> str:
    return SUBJECT_PREFIX + action


class TenantRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str = Field(min_length=1, max_length=200)
    tenant: str = Field(min_length=1, max_length=200)


class SubscriptionOrdering(BaseModel):
    """Ordered delivery by key: events of one key are attempted one at a time, in the order
    they were published. `key`: a CEL expression over the event (`event.data.order_id`);
    null: the whole subscription is one sequence."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"key": "event.data.order_id"}]}
    )

    key: str | None = Field(default=None, min_length=1, max_length=2000)


class CreateSubscription(TenantRequest):
    """Subscribe `endpoint_url` to `events` (types `source` emits) for `tenant`."""

    endpoint_url: str
    events: list[str]
    description: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    email: str | None = Field(default=None, max_length=320)
    # Checked by the hub as its HTTP API checks them (durations such as "30s", "5m"; 1 to 30
    # seconds); absent: the tenant's defaults, else the hub's.
    retry_schedule: list[str] | None = None
    timeout_seconds: int | None = None
    # CEL expressions over the event (webhook-hub's README, "Filters and transformations"):
    # a 422 `invalid_expression` naming the field, line and column when one does not compile.
    filter: str | None = None
    transform: str | None = None
    # Deliveries per second at most, across the hub's workers (null: unlimited), and the
    # burst allowed (null: the rate, at least 1); webhook-hub validates them as its API does.
    rate_limit_per_second: float | None = None
    rate_limit_burst: int | None = None
    ordering: SubscriptionOrdering | None = None


class ListSubscriptions(TenantRequest):
    """The tenant's subscriptions made by that source."""


class DeleteSubscription(TenantRequest):
    id: uuid.UUID


class ListDeliveries(TenantRequest):
    """The last `limit` deliveries of one of the tenant's subscriptions made by that source,
    newest first (read only: an outcome summary, no payloads)."""

    id: uuid.UUID
    limit: int = Field(default=10, ge=1, le=MAX_DELIVERIES)


class PortalLinkRequest(TenantRequest):
    """A one-time link into the hub's portal for `tenant`, at `level`: refused (404) unless
    `tenant` holds a subscription that `source` made (a service speaks for its own tenants)."""

    level: PortalLevel = "read"
    ttl_seconds: int = Field(
        default=PORTAL_LINK_DEFAULT_TTL_SECONDS,
        ge=PORTAL_LINK_MIN_TTL_SECONDS,
        le=PORTAL_LINK_MAX_TTL_SECONDS,
    )


class SubscriptionRecord(BaseModel):
    id: uuid.UUID
    consumer_id: uuid.UUID
    endpoint_url: str
    description: str | None
    events: list[str]
    is_active: bool
    headers: dict[str, str]
    timeout_seconds: int
    created_at: datetime
    updated_at: datetime
    last_delivery_at: datetime | None
    failure_count: int
    disabled_at: datetime | None
    disabled_reason: str | None
    secret_rotated_at: datetime | None
    # The schedule set on the subscription (null: the tenant's default or the hub's applies);
    # `timeout_seconds` is the timeout in effect.
    retry_schedule: list[str] | None = None
    filter: str | None = None
    transform: str | None = None
    rate_limit_per_second: float | None = None
    rate_limit_burst: int | None = None
    ordering: SubscriptionOrdering | None = None


class NewSubscriptionRecord(SubscriptionRecord):
    secret: str = Field(description="Standard Webhooks secret; only in the create reply")


class Created(BaseModel):
    ok: Literal[True] = True
    subscription: NewSubscriptionRecord


class Listed(BaseModel):
    ok: Literal[True] = True
    subscriptions: list[SubscriptionRecord]


class Deleted(BaseModel):
    ok: Literal[True] = True


class DeliveryRecord(BaseModel):
    id: uuid.UUID
    event_type: str
    status: str = Field(description="pending, succeeded or failed")
    attempts: int
    last_status_code: int | None
    created_at: datetime


class DeliveriesListed(BaseModel):
    ok: Literal[True] = True
    deliveries: list[DeliveryRecord]


class PortalLinkIssued(BaseModel):
    """The link opens a portal session once, before `expires_at`; hand it to the browser only."""

    ok: Literal[True] = True
    url: str
    expires_at: datetime


class Refused(BaseModel):
    """A request the hub did not carry out; `status` and `code` are its HTTP API's."""

    model_config = ConfigDict(extra="allow")

    ok: Literal[False] = False
    status: int
    code: str
    error: str

    @classmethod
    def of(cls, error: ServiceError) -> Refused:
        return cls(status=error.status_code, code=error.code, error=error.message, **error.extra)

    @property
    def extra(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class HubRefused(Exception):
    def __init__(self, reply: Refused) -> None:
        self.reply = reply
        super().__init__(reply.error)


class HubUnavailable(ServiceUnavailable):
    default_message = "webhook-hub did not answer; try again shortly"


Reply = TypeVar("Reply", Created, Listed, Deleted, DeliveriesListed, PortalLinkIssued)


class NatsLink(Protocol):
    """Where the client comes from when a request is made (`servicekit.runtime.NatsConnection`
    raises `ServiceUnavailable` while NATS is not reachable yet)."""

    @property
    def client(self) -> NatsClient: ...


class HubSubscriptions:
    """The asking side: one method per action, a typed reply or `HubRefused`/`HubUnavailable`."""

    def __init__(self, nats: NatsLink, *, source: str, timeout: float) -> None:
        self.nats = nats
        self.source = source
        self.timeout = timeout

    async def create(
        self,
        tenant: str,
        endpoint_url: str,
        events: list[str],
        *,
        email: str | None = None,
        retry_schedule: list[str] | None = None,
        timeout_seconds: int | None = None,
        filter: str | None = None,
        transform: str | None = None,
        rate_limit_per_second: float | None = None,
        rate_limit_burst: int | None = None,
        ordering: SubscriptionOrdering | None = None,
    ) -> NewSubscriptionRecord:
        # Only the fields given are sent (the request is dumped `exclude_unset`).
        optional = {
            name: value
            for name, value in (
                ("retry_schedule", retry_schedule),
                ("timeout_seconds", timeout_seconds),
            )
            if value is not None
        }
        request = CreateSubscription(
            source=self.source,
            tenant=tenant,
            endpoint_url=endpoint_url,
            events=events,
            email=email,
            **optional,
            filter=filter,
            transform=transform,
            rate_limit_per_second=rate_limit_per_second,
            rate_limit_burst=rate_limit_burst,
            ordering=ordering,
        )
        return (await self._ask("create", request, Created)).subscription

    async def deliveries(
        self, tenant: str, subscription_id: uuid.UUID, *, limit: int = 10
    ) -> list[DeliveryRecord]:
        request = ListDeliveries(source=self.source, tenant=tenant, id=subscription_id, limit=limit)
        return (await self._ask("deliveries", request, DeliveriesListed)).deliveries

    async def list(self, tenant: str) -> list[SubscriptionRecord]:
        request = ListSubscriptions(source=self.source, tenant=tenant)
        return (await self._ask("list", request, Listed)).subscriptions

    async def delete(self, tenant: str, subscription_id: uuid.UUID) -> None:
        request = DeleteSubscription(source=self.source, tenant=tenant, id=subscription_id)
        await self._ask("delete", request, Deleted)

    async def portal_link(
        self,
        tenant: str,
        level: PortalLevel = "read",
        *,
        ttl_seconds: int = PORTAL_LINK_DEFAULT_TTL_SECONDS,
    ) -> PortalLinkIssued:
        request = PortalLinkRequest(
            source=self.source, tenant=tenant, level=level, ttl_seconds=ttl_seconds
        )
        return await self._ask("portal-link", request, PortalLinkIssued)

    async def _ask(self, action: Action, request: TenantRequest, reply: type[Reply]) -> Reply:
        try:
            # NATS not reached yet is the hub not answering, for the callers as for a timeout
            # (an overview tells "unknown" for HubUnavailable instead of failing as a 503).
            client = self.nats.client
            message = await client.request(
                subject(action),
                request.model_dump_json(exclude_unset=True).encode(),
                timeout=self.timeout,
            )
        except (
            ServiceUnavailable,
            nats.errors.NoRespondersError,
            nats.errors.TimeoutError,
            nats.errors.ConnectionClosedError,
        ) as exc:
            raise HubUnavailable() from exc
        answer = json.loads(message.data)
        if not answer.get("ok"):
            raise HubRefused(Refused.model_validate(answer))
        return reply.model_validate(answer)
