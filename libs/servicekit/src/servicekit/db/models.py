"""SQLModel mirrors of the foundation tables (see `foundation.py` for their DDL)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlmodel import Field, SQLModel


def utcnow() -> datetime:
    return datetime.now(UTC)


class ApiKey(SQLModel, table=True):
    __tablename__ = "api_keys"

    id: uuid.UUID = Field(default_factory=uuid.uuid4, primary_key=True)
    owner: str = Field(max_length=200, index=True)
    level: str = Field(max_length=16)
    key_hash: str = Field(max_length=64, unique=True)
    key_prefix: str = Field(max_length=32)
    email: str | None = Field(default=None, max_length=320)
    description: str | None = Field(default=None, max_length=500)
    created_at: datetime = Field(
        default_factory=utcnow,
        sa_type=sa.DateTime(timezone=True),
    )
    revoked_at: datetime | None = Field(
        default=None,
        sa_type=sa.DateTime(timezone=True),
    )


class OutboxEvent(SQLModel, table=True):
    __tablename__ = "outbox_events"

    id: uuid.UUID = Field(default_factory=uuid.uuid4, primary_key=True)
    seq: int | None = Field(
        default=None,
        sa_column=sa.Column(sa.BigInteger(), sa.Identity(always=True), unique=True),
    )
    type: str = Field(max_length=200)
    tenant: str | None = Field(default=None, max_length=200)
    data: dict[str, Any] = Field(sa_column=sa.Column(postgresql.JSONB(), nullable=False))
    # W3C trace context of the span that recorded the event (the envelope's extension).
    traceparent: str | None = Field(default=None, max_length=55)
    tracestate: str | None = Field(default=None, max_length=512)
    occurred_at: datetime = Field(
        default_factory=utcnow,
        sa_type=sa.DateTime(timezone=True),
    )
    published_at: datetime | None = Field(
        default=None,
        sa_type=sa.DateTime(timezone=True),
    )
    # Set aside by the relay: this row could not be published (its error beside it).
    failed_at: datetime | None = Field(
        default=None,
        sa_type=sa.DateTime(timezone=True),
    )
    last_error: str | None = Field(default=None, sa_type=sa.Text())


class ProcessedEvent(SQLModel, table=True):
    __tablename__ = "processed_events"

    consumer: str = Field(primary_key=True, max_length=200)
    event_id: uuid.UUID = Field(primary_key=True)
    processed_at: datetime = Field(
        default_factory=utcnow,
        sa_type=sa.DateTime(timezone=True),
    )


class MailMessage(SQLModel, table=True):
    """Mail to send, written in the transaction that decided it and sent by the worker, so an
    SMTP outage delays a message but never loses it (see servicekit.mail_outbox)."""

    __tablename__ = "mail_outbox"

    id: uuid.UUID = Field(default_factory=uuid.uuid4, primary_key=True)
    recipient: str = Field(max_length=320)
    subject: str = Field(max_length=500)
    body: str
    created_at: datetime = Field(default_factory=utcnow, sa_type=sa.DateTime(timezone=True))
    sent_at: datetime | None = Field(default=None, sa_type=sa.DateTime(timezone=True))
    attempts: int = 0
    last_error: str | None = None
    # When the worker tries it (again): retries back off; a dead letter is never tried.
    next_attempt_at: datetime = Field(default_factory=utcnow, sa_type=sa.DateTime(timezone=True))
    dead_at: datetime | None = Field(default=None, sa_type=sa.DateTime(timezone=True))


class PageSessionFields(SQLModel):
    """The columns of a service's page-session table (servicekit.auth.page_sessions; DDL in
    `foundation.py`): the cookie's token, hashed, names the row, which stands on `api_key_id`
    (the key signed in with, or its link's issuer). Each service names its own table."""

    id_hash: str = Field(primary_key=True, max_length=64)
    service: str = Field(max_length=64)
    owner: str = Field(max_length=200)
    level: str = Field(max_length=16)
    api_key_id: uuid.UUID | None = None
    created_at: datetime = Field(sa_type=sa.DateTime(timezone=True))
    last_seen_at: datetime = Field(sa_type=sa.DateTime(timezone=True))
    expires_at: datetime = Field(sa_type=sa.DateTime(timezone=True))
