"""Covering indexes for the portal's aggregates: the per-endpoint delivery counts (by hour,
day and status) and the attempt-latency percentiles read only these indexes (index-only
scans), so a million-row log charts in milliseconds. The delivery log's keyset index gains
`status` (the same keys, so paging uses it as before) instead of a second index on deliveries.

Revision ID: 0009
Revises: 0008
"""

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_deliveries_subscription_created_status",
        "deliveries",
        ["subscription_id", "created_at", "id"],
        postgresql_include=["status"],
    )
    op.drop_index("ix_deliveries_subscription_created", "deliveries")
    op.create_index(
        "ix_delivery_attempts_delivery_timing",
        "delivery_attempts",
        ["delivery_id"],
        postgresql_include=["attempted_at", "duration_ms"],
    )
    # The plain index on delivery_id is the covering one's prefix: one index to write, not two.
    op.drop_index("ix_delivery_attempts_delivery_id", "delivery_attempts")


def downgrade() -> None:
    op.create_index("ix_delivery_attempts_delivery_id", "delivery_attempts", ["delivery_id"])
    op.drop_index("ix_delivery_attempts_delivery_timing", "delivery_attempts")
    op.create_index(
        "ix_deliveries_subscription_created", "deliveries", ["subscription_id", "created_at", "id"]
    )
    op.drop_index("ix_deliveries_subscription_created_status", "deliveries")
