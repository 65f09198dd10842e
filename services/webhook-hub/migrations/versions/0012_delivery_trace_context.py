"""Deliveries keep the W3C trace context of their dispatch, so a retry hours later can link
to the trace that caused it and send the same trace id; subscriptions may turn sending it off.

Revision ID: 0012
Revises: 0011
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("deliveries", sa.Column("traceparent", sa.String(55), nullable=True))
    op.add_column("deliveries", sa.Column("tracestate", sa.Text(), nullable=True))
    op.add_column(
        "subscriptions",
        sa.Column("send_trace_context", sa.Boolean(), nullable=False, server_default=sa.true()),
    )


def downgrade() -> None:
    op.drop_column("subscriptions", "send_trace_context")
    op.drop_column("deliveries", "tracestate")
    op.drop_column("deliveries", "traceparent")
