"""The portal charts' rollup: one row per endpoint and settled hour (deliveries created in the
hour, counted by outcome, and the p50/p95 of their attempts' durations). Written lazily by the
portal when it first shows an hour that is over and has no pending delivery; deleted by a retry
or a recover of a delivery created in the hour (the only ways a settled delivery becomes
pending again); gone with its subscription. The delivery engine never writes it.

Revision ID: 0011
Revises: 0010
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "delivery_hour_stats",
        sa.Column(
            "subscription_id",
            sa.Uuid(),
            sa.ForeignKey("subscriptions.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("hour_start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("succeeded", sa.Integer(), nullable=False),
        sa.Column("failed", sa.Integer(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        # Percentiles of one hour's attempts: not summable, so the charts show them per hour.
        sa.Column("p50_ms", sa.Float(), nullable=True),
        sa.Column("p95_ms", sa.Float(), nullable=True),
        sa.Column(
            "computed_at",
            sa.DateTime(timezone=True),
            nullable=False,
            server_default=sa.text("now()"),
        ),
        sa.PrimaryKeyConstraint("subscription_id", "hour_start"),
    )


def downgrade() -> None:
    op.drop_table("delivery_hour_stats")
