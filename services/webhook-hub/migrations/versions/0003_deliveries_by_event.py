"""Deliveries' unique key led by the event: dispatch looks up "which of these events were
stored already" by event id alone.

Revision ID: 0003
Revises: 0002
"""

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_constraint("uq_deliveries_subscription_event", "deliveries", type_="unique")
    op.create_unique_constraint(
        "uq_deliveries_event_subscription", "deliveries", ["event_id", "subscription_id"]
    )


def downgrade() -> None:
    op.drop_constraint("uq_deliveries_event_subscription", "deliveries", type_="unique")
    op.create_unique_constraint(
        "uq_deliveries_subscription_event", "deliveries", ["subscription_id", "event_id"]
    )
