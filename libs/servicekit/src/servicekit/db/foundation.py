"""Tables every service has (API keys, outbox, processed events), created by its first migration.

Each service's first Alembic revision calls `create_foundation_tables()`, so the DDL is
written once and every service's schema still changes only through its own migrations.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql


def create_foundation_tables() -> None:
    op.create_table(
        "api_keys",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("level", sa.String(16), nullable=False),
        sa.Column("key_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("key_prefix", sa.String(32), nullable=False),
        sa.Column("email", sa.String(320), nullable=True),
        sa.Column("description", sa.String(500), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("level IN ('read', 'write', 'admin')", name="ck_api_keys_level"),
    )
    op.create_index("ix_api_keys_owner", "api_keys", ["owner"])
    op.create_table(
        "outbox_events",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column("seq", sa.BigInteger(), sa.Identity(always=True), nullable=False, unique=True),
        sa.Column("type", sa.String(200), nullable=False),
        sa.Column("tenant", sa.String(200), nullable=True),
        sa.Column("data", postgresql.JSONB(), nullable=False),
        sa.Column("occurred_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("published_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index(
        "ix_outbox_events_pending",
        "outbox_events",
        ["seq"],
        postgresql_where=sa.text("published_at IS NULL"),
    )
    op.create_index("ix_outbox_events_published_at", "outbox_events", ["published_at"])
    op.create_table(
        "processed_events",
        sa.Column("consumer", sa.String(200), primary_key=True),
        sa.Column("event_id", sa.Uuid(), primary_key=True),
        sa.Column("processed_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_processed_events_processed_at", "processed_events", ["processed_at"])


def add_outbox_trace_context() -> None:
    """The W3C trace context an outbox row carries into its envelope (servicekit.tracing)."""
    op.add_column("outbox_events", sa.Column("traceparent", sa.String(55), nullable=True))
    op.add_column("outbox_events", sa.Column("tracestate", sa.String(512), nullable=True))


def add_outbox_set_aside() -> None:
    """An outbox row that cannot be published (its payload past NATS's limit, say) is set
    aside with its error instead of holding up the rows behind it (servicekit.events.relay)."""
    op.add_column("outbox_events", sa.Column("failed_at", sa.DateTime(timezone=True)))
    op.add_column("outbox_events", sa.Column("last_error", sa.Text()))


def drop_outbox_set_aside() -> None:
    op.drop_column("outbox_events", "last_error")
    op.drop_column("outbox_events", "failed_at")


def drop_outbox_trace_context() -> None:
    op.drop_column("outbox_events", "tracestate")
    op.drop_column("outbox_events", "traceparent")


def drop_foundation_tables() -> None:
    op.drop_table("processed_events")
    op.drop_table("outbox_events")
    op.drop_table("api_keys")


def create_mail_outbox_table() -> None:
    op.create_table(
        "mail_outbox",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column("recipient", sa.String(320), nullable=False),
        sa.Column("subject", sa.String(500), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("sent_at", sa.DateTime(timezone=True)),
        sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("last_error", sa.Text()),
    )
    _create_mail_pending_index()


def _create_mail_pending_index() -> None:
    """The first mail outbox's index of unsent mail: created with the table, and again when
    the retries are downgraded away."""
    op.create_index(
        "ix_mail_outbox_pending",
        "mail_outbox",
        ["created_at"],
        postgresql_where=sa.text("sent_at IS NULL"),
    )


def add_mail_outbox_retries() -> None:
    """Backed-off retries and dead letters (servicekit.mail_outbox)."""
    op.add_column(
        "mail_outbox",
        sa.Column(
            "next_attempt_at",
            sa.DateTime(timezone=True),
            nullable=False,
            server_default=sa.text("now()"),
        ),
    )
    op.add_column("mail_outbox", sa.Column("dead_at", sa.DateTime(timezone=True)))
    op.drop_index("ix_mail_outbox_pending", table_name="mail_outbox")
    op.create_index(
        "ix_mail_outbox_due",
        "mail_outbox",
        ["next_attempt_at"],
        postgresql_where=sa.text("sent_at IS NULL AND dead_at IS NULL"),
    )


def drop_mail_outbox_retries() -> None:
    op.drop_index("ix_mail_outbox_due", table_name="mail_outbox")
    _create_mail_pending_index()
    op.drop_column("mail_outbox", "dead_at")
    op.drop_column("mail_outbox", "next_attempt_at")


def add_mail_outbox_finished_index() -> None:
    """Retention's cutoff on mail sent or dead-lettered (servicekit.retention): one index on
    the moment a message was finished with, holding only finished messages."""
    op.execute(
        "CREATE INDEX IF NOT EXISTS ix_mail_outbox_finished"
        " ON mail_outbox ((coalesce(sent_at, dead_at)))"
        " WHERE sent_at IS NOT NULL OR dead_at IS NOT NULL"
    )


def drop_mail_outbox_finished_index() -> None:
    op.execute("DROP INDEX IF EXISTS ix_mail_outbox_finished")


# The outbox's two indexes as the first migration made them: the relay's claim of unsent rows
# in order, and retention's cutoff on published rows.
_OUTBOX_INDEXES = {
    "ix_outbox_events_pending": "(seq) WHERE published_at IS NULL",
    "ix_outbox_events_published_at": "(published_at)",
}


def create_outbox_indexes_concurrently() -> None:
    """Build the outbox's indexes again where a service's second migration dropped them (its
    autogenerated diff did): without them the relay's claim walks every retained published
    row in `seq` order and retention scans the table. Built concurrently, so the workers keep
    writing meanwhile; each step may run again (one a failed build left invalid is rebuilt)."""
    with op.get_context().autocommit_block():
        for name, definition in _OUTBOX_INDEXES.items():
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
            op.execute(f"CREATE INDEX CONCURRENTLY {name} ON outbox_events {definition}")


def drop_outbox_indexes_concurrently() -> None:
    with op.get_context().autocommit_block():
        for name in _OUTBOX_INDEXES:
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")


def create_page_sessions_table(name: str) -> None:
    """A service's page sessions (servicekit.auth.page_sessions): the token's SHA-256 names a
    row; the clean-up deletes by `expires_at`. A session stands on the key that opened it (or
    issued its link): deleting the key's row deletes its sessions too."""
    op.create_table(
        name,
        sa.Column("id_hash", sa.String(64), primary_key=True),
        sa.Column("service", sa.String(64), nullable=False),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("level", sa.String(16), nullable=False),
        sa.Column(
            "api_key_id",
            sa.Uuid(),
            sa.ForeignKey("api_keys.id", ondelete="CASCADE", name=f"fk_{name}_api_key_id"),
            nullable=True,
        ),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index(f"ix_{name}_expires_at", name, ["expires_at"])
    op.create_index(f"ix_{name}_api_key_id", name, ["api_key_id"])


def drop_page_sessions_table(name: str) -> None:
    op.drop_table(name)


def add_link_issuer(table: str) -> None:
    """The key that asked for a sign-in link (none from an operator's CLI): the link and its
    session end with the key."""
    op.add_column(
        table,
        sa.Column(
            "api_key_id",
            sa.Uuid(),
            sa.ForeignKey("api_keys.id", ondelete="CASCADE", name=f"fk_{table}_api_key_id"),
            nullable=True,
        ),
    )


def drop_link_issuer(table: str) -> None:
    op.drop_column(table, "api_key_id")
