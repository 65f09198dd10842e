"""Webhook registration in two steps: a local `pending` row first, the hub's subscription id
recorded when it is `active` (existing rows were keyed by that id and are active).

Revision ID: 0005_webhook_registration
Revises: 0004_mail_outbox_retries
"""

import sqlalchemy as sa
from alembic import op

revision = "0005_webhook_registration"
down_revision = "0004_mail_outbox_retries"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("scraper_webhooks", sa.Column("subscription_id", sa.String(64), nullable=True))
    op.add_column(
        "scraper_webhooks",
        sa.Column("status", sa.String(16), nullable=False, server_default="pending"),
    )
    op.execute("UPDATE scraper_webhooks SET subscription_id = id, status = 'active'")
    op.create_unique_constraint(
        "uq_scraper_webhooks_subscription_id", "scraper_webhooks", ["subscription_id"]
    )
    op.create_index("ix_scraper_webhooks_status", "scraper_webhooks", ["status", "created_at"])


def downgrade() -> None:
    op.execute("DELETE FROM scraper_webhooks WHERE status <> 'active'")
    op.execute("UPDATE scraper_webhooks SET id = subscription_id")
    op.drop_index("ix_scraper_webhooks_status", "scraper_webhooks")
    op.drop_constraint("uq_scraper_webhooks_subscription_id", "scraper_webhooks")
    op.drop_column("scraper_webhooks", "status")
    op.drop_column("scraper_webhooks", "subscription_id")
