"""Tables of webhook-hub. The foundation tables (API keys, outbox, processed events) come from
servicekit; their DDL is in the first migration, these in the second."""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum
from typing import Any

import sqlalchemy as sa
from servicekit.db.models import (
    ApiKey,
    MailMessage,
    OutboxEvent,
    PageSessionFields,
    ProcessedEvent,
    utcnow,
)
from servicekit.events.registry import Visibility
from sqlalchemy.dialects import postgresql
from sqlmodel import Field, SQLModel

metadata = SQLModel.metadata


def _tz(**kwargs: Any) -> Any:
    return Field(sa_type=sa.DateTime(timezone=True), **kwargs)


class DeliveryStatus(StrEnum):
    """A delivery's state: `pending` until an attempt succeeds (`succeeded`) or the retry
    schedule runs out or the endpoint answers 410 (`failed`)."""

    PENDING = "pending"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class AttemptOutcome(StrEnum):
    """How one HTTP attempt ended (the worker's metric label)."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"


class Consumer(SQLModel, table=True):
    """Who subscriptions belong to: an API key's owner, or a tenant a service subscribed for."""

    __tablename__ = "consumers"

    owner: str = Field(primary_key=True, max_length=200)
    id: uuid.UUID = Field(default_factory=uuid.uuid4, unique=True)
    email: str | None = Field(default=None, max_length=320)
    created_at: datetime = _tz(default_factory=utcnow)
    # Set by an operator (`webhook-hub consumers approve-personal-data`): may receive event
    # types of `personal` visibility.
    personal_data_approved: bool = Field(
        default=False, sa_column_kwargs={"server_default": sa.false()}
    )
    # The owner's defaults for its subscriptions that set none (null: the service's setting).
    default_retry_schedule: list[int] | None = Field(
        default=None, sa_column=sa.Column(postgresql.ARRAY(sa.Integer()), nullable=True)
    )
    default_timeout_seconds: int | None = None


class EventType(SQLModel, table=True):
    __tablename__ = "event_types"

    name: str = Field(primary_key=True, max_length=200)
    description: str = Field(default="")
    example_payload: dict[str, Any] = Field(
        default_factory=dict, sa_column=sa.Column(postgresql.JSONB(), nullable=False)
    )
    schema_: dict[str, Any] = Field(
        default_factory=dict,
        sa_column=sa.Column("schema", postgresql.JSONB(), nullable=False),
    )
    source: str = Field(default="", max_length=200)
    # The consumer that registered it over HTTP; null for a type a service declares (a
    # platform type). Only this owner may submit events of it with a consumer's key.
    owner: str | None = Field(default=None, max_length=200)
    # `public`, or `personal` (servicekit.events.Visibility): see the README.
    # A string column (not a database enum): a StrEnum binds and compares as its value.
    visibility: Visibility = Field(
        default=Visibility.PUBLIC,
        sa_type=sa.String(16),
        sa_column_kwargs={"server_default": Visibility.PUBLIC.value},
    )
    is_active: bool = True
    updated_at: datetime = _tz(default_factory=utcnow)


class Subscription(SQLModel, table=True):
    __tablename__ = "subscriptions"

    id: uuid.UUID = Field(default_factory=uuid.uuid4, primary_key=True)
    consumer_id: uuid.UUID = Field(index=True)
    owner: str = Field(max_length=200, index=True)
    endpoint_url: str = Field(max_length=2048)
    secret: str = Field(max_length=64)
    description: str | None = None
    events: list[str] = Field(sa_column=sa.Column(postgresql.ARRAY(sa.String(200)), nullable=False))
    is_active: bool = True
    headers: dict[str, str] = Field(
        default_factory=dict, sa_column=sa.Column(postgresql.JSONB(), nullable=False)
    )
    # Null: not set, the owner's default or the service's setting is in effect (migration 0021).
    timeout_seconds: int | None = None
    created_at: datetime = _tz(default_factory=utcnow)
    updated_at: datetime = _tz(default_factory=utcnow)
    last_delivery_at: datetime | None = _tz(default=None)
    failure_count: int = 0
    disabled_at: datetime | None = _tz(default=None)
    disabled_reason: str | None = None
    secret_old: str | None = Field(default=None, max_length=64)
    secret_rotated_at: datetime | None = _tz(default=None)
    # The service that asked for it over NATS (scraper-manager), or null for the HTTP API.
    created_by_source: str | None = Field(default=None, max_length=200)
    # Outgoing webhooks carry `traceparent`/`tracestate` (the receiver joins our trace).
    send_trace_context: bool = Field(default=True, sa_column_kwargs={"server_default": sa.true()})
    # The waits between attempts, in seconds (one retry per entry); null: not set, as above.
    retry_schedule: list[int] | None = Field(
        default=None, sa_column=sa.Column(postgresql.ARRAY(sa.Integer()), nullable=True)
    )
    # CEL expressions over the event (issue 32; `webhook_hub.expressions`): which events
    # it receives, and the JSON sent in place of their `data`. Compiled when saved.
    filter: str | None = Field(default=None, sa_column=sa.Column(sa.Text(), nullable=True))
    transform: str | None = Field(default=None, sa_column=sa.Column(sa.Text(), nullable=True))
    # Deliveries per second at most (null: unlimited), across all workers; bursts of up to
    # `rate_limit_burst` (null: `greatest(1, ceil(rate))`). Enforced by the claims' token bucket.
    rate_limit_per_second: float | None = None
    rate_limit_burst: int | None = None
    # Ordered delivery (issue 32): null, or `{"key": "<CEL expression>" | null}` (null key:
    # the whole subscription is one sequence). Compiled when saved; see the README.
    ordering: dict[str, Any] | None = Field(
        default=None, sa_column=sa.Column(postgresql.JSONB(), nullable=True)
    )


class Delivery(SQLModel, table=True):
    """One event for one subscription: created once, attempted until it succeeds or gives up.

    The table is partitioned by `log_time` (migration 0020), which this model leaves out: the
    store writes it (`partitions.Layout.log_time_of`), a row the ORM adds (a test event) gets
    the column's default (now), and rows from before the migration hold `-infinity`, which
    no Python datetime can hold. The database's key is (id, log_time); `id` alone identifies
    a delivery (its id is derived from subscription and event), and the ORM looks rows up
    by it."""

    __tablename__ = "deliveries"

    id: uuid.UUID = Field(default_factory=uuid.uuid4, primary_key=True)
    # No foreign key (migration 0015): a trigger deletes a subscription's deliveries with it,
    # and writers lock the subscription's row instead of a check per delivery.
    subscription_id: uuid.UUID
    event_id: uuid.UUID
    event_type: str = Field(max_length=200)
    # `json`: the text as first sent, which every attempt sends again (migration 0013).
    payload: dict[str, Any] = Field(sa_column=sa.Column(postgresql.JSON(), nullable=False))
    event_time: datetime = _tz(default_factory=utcnow)
    status: DeliveryStatus = Field(default=DeliveryStatus.PENDING, sa_type=sa.String(16))
    attempts: int = 0
    next_attempt_at: datetime | None = _tz(default_factory=utcnow)
    lease_until: datetime | None = _tz(default=None)
    last_attempt_at: datetime | None = _tz(default=None)
    last_status_code: int | None = None
    last_error: str | None = None
    created_at: datetime = _tz(default_factory=utcnow)
    completed_at: datetime | None = _tz(default=None)
    # The W3C trace context of the dispatch (or of the event, when the hub does not trace):
    # retries link to it and send it on.
    traceparent: str | None = Field(default=None, max_length=55)
    tracestate: str | None = None
    # The first attempt, when it was made straight from the event: written with the row
    # (which it created, so it started at `created_at`) instead of a row of
    # `delivery_attempts` (migration 0014). Null for rows whose first attempt is a row there.
    first_status_code: int | None = None
    first_response_body: str | None = None
    first_duration_ms: int | None = None
    first_error: str | None = None
    # Ordered delivery: the key (text) and the event's stream sequence; null when unordered.
    order_key: str | None = None
    order_seq: int | None = Field(default=None, sa_type=sa.BigInteger)
    # The delivery of its key this one waited behind while that one failed, and from when to
    # when (written when the holder succeeded or gave up).
    held_by: uuid.UUID | None = None
    held_since: datetime | None = _tz(default=None)
    held_until: datetime | None = _tz(default=None)

    def first_attempt(self) -> DeliveryAttempt | None:
        """The attempt stored in this row, as the log shows attempts (with this row's id)."""
        if self.first_duration_ms is None:
            return None
        return DeliveryAttempt(
            id=self.id,
            delivery_id=self.id,
            attempted_at=self.created_at,
            status_code=self.first_status_code,
            response_body=self.first_response_body,
            duration_ms=self.first_duration_ms,
            error=self.first_error,
        )


class DeliveryAttempt(SQLModel, table=True):
    __tablename__ = "delivery_attempts"

    # Written by COPY without an id: the database makes it.
    id: uuid.UUID = Field(
        default_factory=uuid.uuid4,
        primary_key=True,
        sa_column_kwargs={"server_default": sa.text("gen_random_uuid()")},
    )
    # No foreign key (migration 0020: `deliveries` is partitioned): a subscription's deletion
    # deletes its deliveries' attempts by trigger, and partitions are dropped by time.
    delivery_id: uuid.UUID = Field(index=True)
    # The partition key (by its own time: an attempt is kept as long as the retention says).
    attempted_at: datetime = _tz(default_factory=utcnow)
    status_code: int | None = None
    response_body: str | None = None
    duration_ms: int = 0
    error: str | None = None


class PortalLink(SQLModel, table=True):
    """A one-time link into the portal: only the token's SHA-256 is kept; `used_at` is set by
    the one sign-in it allows."""

    __tablename__ = "portal_links"

    token_hash: str = Field(primary_key=True, max_length=64)
    owner: str = Field(max_length=200)
    level: str = Field(max_length=16)
    created_at: datetime = _tz(default_factory=utcnow)
    expires_at: datetime = _tz()
    used_at: datetime | None = _tz(default=None)
    # The key that asked for the link (none from the operators' CLI): the link dies with it.
    api_key_id: uuid.UUID | None = None


class PortalSession(PageSessionFields, table=True):
    """A portal page session (servicekit.auth.page_sessions)."""

    __tablename__ = "portal_sessions"


class IdempotencyKey(SQLModel, table=True):
    __tablename__ = "idempotency_keys"

    owner: str = Field(primary_key=True, max_length=200)
    key: str = Field(primary_key=True, max_length=200)
    event_id: uuid.UUID
    created_at: datetime = _tz(default_factory=utcnow)


__all__ = [
    "ApiKey",
    "AttemptOutcome",
    "Consumer",
    "Delivery",
    "DeliveryAttempt",
    "DeliveryStatus",
    "EventType",
    "IdempotencyKey",
    "MailMessage",
    "OutboxEvent",
    "PortalLink",
    "PortalSession",
    "ProcessedEvent",
    "Subscription",
    "metadata",
]
