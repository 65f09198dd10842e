"""Scrapers, runs, collected items, webhooks; mail outbox.

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


def upgrade() -> None:
    create_mail_outbox_table()
    op.create_table(
        "scraper_webhooks",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("url", sa.String(2048), nullable=False),
        sa.Column("events", postgresql.ARRAY(sa.String(length=200)), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_scraper_webhooks_owner"), "scraper_webhooks", ["owner"], unique=False)
    op.create_table(
        "scrapers",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("url", sa.String(2048), nullable=False),
        sa.Column("schedule", sa.String(200), nullable=True),
        sa.Column("timezone", sa.String(64), nullable=False),
        sa.Column("proxy_pool", sa.String(100), nullable=True),
        sa.Column("rate_limit", sa.Integer(), nullable=False),
        sa.Column(
            "headers", postgresql.JSONB(astext_type=sa.Text()), server_default="{}", nullable=False
        ),
        sa.Column("max_pages", sa.Integer(), nullable=False),
        sa.Column("max_depth", sa.Integer(), nullable=True),
        sa.Column("follow", sa.String(500), nullable=True),
        sa.Column(
            "selectors",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default="{}",
            nullable=False,
        ),
        sa.Column("item_selector", sa.String(500), nullable=True),
        sa.Column("obey_robots", sa.Boolean(), nullable=False),
        sa.Column("concurrency", sa.Integer(), nullable=False),
        sa.Column("timeout_seconds", sa.Integer(), nullable=False),
        sa.Column("next_fire_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_scrapers_owner"), "scrapers", ["owner"], unique=False)
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("scraper_id", sa.Integer(), nullable=False),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("trigger", sa.String(16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("items_collected", sa.Integer(), nullable=False),
        sa.Column("pages_fetched", sa.Integer(), nullable=False),
        sa.Column("requests_failed", sa.Integer(), nullable=False),
        sa.Column("retries", sa.Integer(), nullable=False),
        sa.Column("bytes_received", sa.BigInteger(), nullable=False),
        sa.Column(
            "status_counts",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default="{}",
            nullable=False,
        ),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("stop_requested", sa.Boolean(), nullable=False),
        sa.Column("worker_id", sa.String(200), nullable=True),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["scraper_id"], ["scrapers.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_runs_scraper_id"), "runs", ["scraper_id"], unique=False)
    op.create_table(
        "items",
        sa.Column("id", sa.BigInteger(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("scraper_id", sa.Integer(), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("data", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_items_run_id"), "items", ["run_id"], unique=False)
    op.create_index(op.f("ix_items_scraper_id"), "items", ["scraper_id"], unique=False)
    op.drop_index(
        op.f("ix_outbox_events_pending"),
        table_name="outbox_events",
        postgresql_where="(published_at IS NULL)",
    )
    op.drop_index(op.f("ix_outbox_events_published_at"), table_name="outbox_events")
    op.drop_index(op.f("ix_processed_events_processed_at"), table_name="processed_events")

    # The scraper's latest run, and the runs a worker may take or must watch.
    op.create_index("ix_runs_scraper_created", "runs", ["scraper_id", "id"])
    op.create_index(
        "ix_runs_active",
        "runs",
        ["status"],
        postgresql_where=sa.text("status IN ('pending', 'running')"),
    )
    op.create_index("ix_scrapers_due", "scrapers", ["next_fire_at"])


def downgrade() -> None:
    op.create_index(
        op.f("ix_processed_events_processed_at"), "processed_events", ["processed_at"], unique=False
    )
    op.create_index(
        op.f("ix_outbox_events_published_at"), "outbox_events", ["published_at"], unique=False
    )
    op.create_index(
        op.f("ix_outbox_events_pending"),
        "outbox_events",
        ["seq"],
        unique=False,
        postgresql_where="(published_at IS NULL)",
    )
    op.drop_index(op.f("ix_items_scraper_id"), table_name="items")
    op.drop_index(op.f("ix_items_run_id"), table_name="items")
    op.drop_table("items")
    op.drop_index(op.f("ix_runs_scraper_id"), table_name="runs")
    op.drop_table("runs")
    op.drop_index(op.f("ix_scrapers_owner"), table_name="scrapers")
    op.drop_table("scrapers")
    op.drop_index(op.f("ix_scraper_webhooks_owner"), table_name="scraper_webhooks")
    op.drop_table("scraper_webhooks")
    op.drop_table("mail_outbox")
