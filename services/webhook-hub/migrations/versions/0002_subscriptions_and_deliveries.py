"""Consumers, event types, subscriptions, deliveries and their attempts, idempotency keys,
mail outbox.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op
from servicekit.db.foundation import create_mail_outbox_table
from sqlalchemy.dialects import postgresql

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "consumers",
        sa.Column("owner", sa.String(200), primary_key=True),
        sa.Column("id", sa.Uuid(), nullable=False, unique=True),
        sa.Column("email", sa.String(320)),
        sa.Column("created_at", TZ, nullable=False),
    )
    op.create_table(
        "event_types",
        sa.Column("name", sa.String(200), primary_key=True),
        sa.Column("description", sa.Text(), nullable=False, server_default=""),
        sa.Column("example_payload", postgresql.JSONB(), nullable=False),
        sa.Column("schema", postgresql.JSONB(), nullable=False),
        sa.Column("source", sa.String(200), nullable=False, server_default=""),
        sa.Column("is_active", sa.Boolean(), nullable=False, server_default=sa.true()),
        sa.Column("updated_at", TZ, nullable=False),
    )
    op.create_table(
        "subscriptions",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column("consumer_id", sa.Uuid(), nullable=False),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("endpoint_url", sa.String(2048), nullable=False),
        sa.Column("secret", sa.String(64), nullable=False),
        sa.Column("description", sa.Text()),
        sa.Column("events", postgresql.ARRAY(sa.String(200)), nullable=False),
        sa.Column("is_active", sa.Boolean(), nullable=False),
        sa.Column("headers", postgresql.JSONB(), nullable=False),
        sa.Column("timeout_seconds", sa.Integer(), nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("updated_at", TZ, nullable=False),
        sa.Column("last_delivery_at", TZ),
        sa.Column("failure_count", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("disabled_at", TZ),
        sa.Column("disabled_reason", sa.Text()),
        sa.Column("secret_old", sa.String(64)),
        sa.Column("secret_rotated_at", TZ),
        sa.Column("created_by_source", sa.String(200)),
    )
    op.create_index(
        "ix_subscriptions_owner_created", "subscriptions", ["owner", "created_at", "id"]
    )
    op.create_index("ix_subscriptions_consumer_id", "subscriptions", ["consumer_id"])
    # Dispatch asks "active subscriptions whose events contain T or '*'": a GIN index on events.
    op.create_index(
        "ix_subscriptions_active_events",
        "subscriptions",
        ["events"],
        postgresql_using="gin",
        postgresql_where=sa.text("is_active"),
    )
    op.create_table(
        "deliveries",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column(
            "subscription_id",
            sa.Uuid(),
            sa.ForeignKey("subscriptions.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("event_id", sa.Uuid(), nullable=False),
        sa.Column("event_type", sa.String(200), nullable=False),
        sa.Column("payload", postgresql.JSONB(), nullable=False),
        sa.Column("event_time", TZ, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("next_attempt_at", TZ),
        sa.Column("lease_until", TZ),
        sa.Column("last_attempt_at", TZ),
        sa.Column("last_status_code", sa.Integer()),
        sa.Column("last_error", sa.Text()),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("completed_at", TZ),
        sa.UniqueConstraint("subscription_id", "event_id", name="uq_deliveries_subscription_event"),
        sa.CheckConstraint(
            "status IN ('pending', 'succeeded', 'failed')", name="ck_deliveries_status"
        ),
    )
    op.create_index(
        "ix_deliveries_due",
        "deliveries",
        ["next_attempt_at"],
        postgresql_where=sa.text("status = 'pending'"),
    )
    op.create_index(
        "ix_deliveries_subscription_created", "deliveries", ["subscription_id", "created_at", "id"]
    )
    op.create_table(
        "delivery_attempts",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column(
            "delivery_id",
            sa.Uuid(),
            sa.ForeignKey("deliveries.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("attempted_at", TZ, nullable=False),
        sa.Column("status_code", sa.Integer()),
        sa.Column("response_body", sa.Text()),
        sa.Column("duration_ms", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text()),
    )
    op.create_index("ix_delivery_attempts_delivery_id", "delivery_attempts", ["delivery_id"])
    op.create_table(
        "idempotency_keys",
        sa.Column("owner", sa.String(200), primary_key=True),
        sa.Column("key", sa.String(200), primary_key=True),
        sa.Column("event_id", sa.Uuid(), nullable=False),
        sa.Column("created_at", TZ, nullable=False),
    )
    create_mail_outbox_table()


def downgrade() -> None:
    for table in (
        "mail_outbox",
        "idempotency_keys",
        "delivery_attempts",
        "deliveries",
        "subscriptions",
        "event_types",
        "consumers",
    ):
        op.drop_table(table)
