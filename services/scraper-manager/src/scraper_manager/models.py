"""Tables of scraper-manager. The foundation tables (API keys, outbox, processed events, mail)
come from servicekit; these are created by the second migration."""

import uuid
from datetime import datetime
from enum import StrEnum
from typing import Any

import sqlalchemy as sa
from servicekit.db.models import ApiKey, OutboxEvent, PageSessionFields, ProcessedEvent, utcnow
from sqlalchemy.dialects import postgresql
from sqlmodel import Field, SQLModel

metadata = SQLModel.metadata


def _tz(**kwargs: Any) -> Any:
    return Field(sa_type=sa.DateTime(timezone=True), **kwargs)


def _json(**kwargs: Any) -> Any:
    return Field(sa_column=sa.Column(postgresql.JSONB(), nullable=False, **kwargs))


class RunStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    STOPPED = "stopped"
    # A firing that found the scraper still running: history, not the scraper's state.
    SKIPPED = "skipped"


ACTIVE_RUN_STATUSES = (RunStatus.PENDING, RunStatus.RUNNING)
FINAL_RUN_STATUSES = (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.STOPPED)


class ScraperStatus(StrEnum):
    """A scraper's status is its latest run's (skipped ones aside), or `idle` without runs."""

    IDLE = "idle"
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    STOPPED = "stopped"


class RunTrigger(StrEnum):
    MANUAL = "manual"
    SCHEDULE = "schedule"


# Ids are typed as present: a row read from the database has one, and one made here gets it
# at its flush (the default None never reaches a caller that reads it).
class Scraper(SQLModel, table=True):
    __tablename__ = "scrapers"

    id: int = Field(default=None, primary_key=True)
    owner: str = Field(max_length=200, index=True)
    name: str = Field(max_length=200)
    url: str = Field(max_length=2048)
    schedule: str | None = Field(default=None, max_length=200)
    timezone: str = Field(default="UTC", max_length=64)
    proxy_pool: str | None = Field(default=None, max_length=100)
    rate_limit: int = 5
    headers: dict[str, str] = _json(server_default="{}")
    max_pages: int = 100
    max_depth: int | None = None
    follow: str | None = Field(default=None, max_length=500)
    selectors: dict[str, str] = _json(server_default="{}")
    item_selector: str | None = Field(default=None, max_length=500)
    obey_robots: bool = True
    concurrency: int = 4
    timeout_seconds: int = 30
    # Keep only this many latest finished runs (with results and logs); None: by age only.
    keep_runs: int | None = None
    # The field that identifies an item across runs (change detection); None: not compared.
    item_key: str | None = Field(default=None, max_length=100)
    # Revalidate pages with the validators the last run saw (If-None-Match, If-Modified-Since).
    revalidate: bool = True
    # "http": the document as fetched; "browser": as headless Chromium leaves it.
    render: str = Field(default="http", max_length=16)
    next_fire_at: datetime | None = _tz(default=None)
    created_at: datetime = _tz(default_factory=utcnow)
    updated_at: datetime = _tz(default_factory=utcnow)


class Run(SQLModel, table=True):
    __tablename__ = "runs"
    # The number the database gives at insert is read back in the INSERT's RETURNING.
    __mapper_args__ = {"eager_defaults": True}

    id: int = Field(default=None, primary_key=True)
    scraper_id: int = Field(foreign_key="scrapers.id", index=True, ondelete="CASCADE")
    # The scraper's own sequence (#1, #2, ...), given by a trigger from the scraper's counter
    # (migration 0012): every way a run is inserted is numbered alike.
    number: int = Field(
        default=None,
        sa_column=sa.Column(sa.Integer, nullable=False, server_default=sa.FetchedValue()),
    )
    owner: str = Field(max_length=200)
    # Stored as text (varchar), compared and bound as the enums' values.
    status: RunStatus = Field(default=RunStatus.PENDING, sa_type=sa.String(16))
    trigger: RunTrigger = Field(default=RunTrigger.MANUAL, sa_type=sa.String(16))
    created_at: datetime = _tz(default_factory=utcnow)
    started_at: datetime | None = _tz(default=None)
    finished_at: datetime | None = _tz(default=None)
    items_collected: int = 0
    pages_fetched: int = 0
    requests_failed: int = 0
    retries: int = 0
    bytes_received: int = Field(default=0, sa_type=sa.BigInteger)
    status_counts: dict[str, int] = _json(server_default="{}")
    # Pages answered 304 whose stored items and links were reused.
    not_modified: int = 0
    # {compared_run_id, added, removed, changed, duplicates, unkeyed}; None: not compared.
    changes: dict[str, Any] | None = Field(
        default=None, sa_column=sa.Column(postgresql.JSONB(), nullable=True)
    )
    last_error: str | None = None
    stop_requested: bool = False
    worker_id: str | None = Field(default=None, max_length=200)
    heartbeat_at: datetime | None = _tz(default=None)


class Item(SQLModel, table=True):
    __tablename__ = "items"

    id: int = Field(default=None, sa_column=sa.Column(sa.BigInteger, primary_key=True))
    run_id: int = Field(foreign_key="runs.id", index=True, ondelete="CASCADE")
    scraper_id: int = Field(index=True)
    url: str
    data: dict[str, Any] = _json()
    created_at: datetime = _tz(default_factory=utcnow)


class ChangeKind(StrEnum):
    ADDED = "added"
    REMOVED = "removed"
    CHANGED = "changed"


class RunChange(SQLModel, table=True):
    """One difference between a run's items and the previous successful run's, by item key.
    `item` is the new item (the old one for `removed`); `fields` only for `changed`."""

    __tablename__ = "run_changes"

    id: int = Field(default=None, sa_column=sa.Column(sa.BigInteger, primary_key=True))
    run_id: int = Field(foreign_key="runs.id", ondelete="CASCADE")
    kind: ChangeKind = Field(sa_type=sa.String(8))
    key: str
    item: dict[str, Any] = _json()
    fields: dict[str, Any] | None = Field(
        default=None, sa_column=sa.Column(postgresql.JSONB(), nullable=True)
    )


class LogLevel(StrEnum):
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


class RunLogLine(SQLModel, table=True):
    """One line of a run's log: what the crawler did, written in batches (crawler.runlog)."""

    __tablename__ = "run_log_lines"

    id: int = Field(default=None, sa_column=sa.Column(sa.BigInteger, primary_key=True))
    run_id: int = Field(foreign_key="runs.id", ondelete="CASCADE")
    level: LogLevel = Field(sa_type=sa.String(8))
    at: datetime = _tz()
    message: str
    fields: dict[str, Any] = _json(server_default="{}")


class DashboardLink(SQLModel, table=True):
    """A one-time sign-in link to the dashboard; only the SHA-256 of its token is kept."""

    __tablename__ = "dashboard_links"

    token_hash: str = Field(primary_key=True, max_length=64)
    owner: str = Field(max_length=200)
    level: str = Field(max_length=16)
    expires_at: datetime = _tz()
    used_at: datetime | None = _tz(default=None)
    created_at: datetime = _tz(default_factory=utcnow)
    # The key that asked for the link (none from the operators' CLI): the link dies with it.
    api_key_id: uuid.UUID | None = None


class DashboardSession(PageSessionFields, table=True):
    """A dashboard page session (servicekit.auth.page_sessions)."""

    __tablename__ = "dashboard_sessions"


class WebhookStatus(StrEnum):
    # Written (and committed) before webhook-hub is asked, so an interrupted registration
    # leaves a trace the reconciler follows; `active` once the hub's subscription is recorded.
    PENDING = "pending"
    ACTIVE = "active"


class ScraperWebhook(SQLModel, table=True):
    """A client's webhook; webhook-hub stores and delivers it as `subscription_id`."""

    __tablename__ = "scraper_webhooks"

    id: str = Field(primary_key=True, max_length=64)
    subscription_id: str | None = Field(default=None, max_length=64)
    status: WebhookStatus = Field(default=WebhookStatus.PENDING, sa_type=sa.String(16))
    owner: str = Field(max_length=200, index=True)
    url: str = Field(max_length=2048)
    events: list[str] = Field(sa_column=sa.Column(postgresql.ARRAY(sa.String(200)), nullable=False))
    created_at: datetime = _tz(default_factory=utcnow)


class OAuthClient(SQLModel, table=True):
    """A corporate client of the client-credentials grant; the secret is kept as SHA-256."""

    __tablename__ = "oauth_clients"

    client_id: str = Field(primary_key=True, max_length=64)
    secret_hash: str = Field(max_length=64)
    owner: str = Field(max_length=200, index=True)
    level: str = Field(max_length=16)
    created_at: datetime = _tz(default_factory=utcnow)
    revoked_at: datetime | None = _tz(default=None)


__all__ = [
    "ACTIVE_RUN_STATUSES",
    "FINAL_RUN_STATUSES",
    "ApiKey",
    "ChangeKind",
    "DashboardLink",
    "DashboardSession",
    "Item",
    "LogLevel",
    "OAuthClient",
    "OutboxEvent",
    "ProcessedEvent",
    "Run",
    "RunChange",
    "RunLogLine",
    "RunStatus",
    "RunTrigger",
    "Scraper",
    "ScraperStatus",
    "ScraperWebhook",
    "WebhookStatus",
    "metadata",
]
