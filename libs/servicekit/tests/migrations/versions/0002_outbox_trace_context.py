"""Outbox rows keep their trace context (servicekit.tracing).

Revision ID: 0002
Revises: 0001
"""

from servicekit.db.foundation import add_outbox_trace_context, drop_outbox_trace_context

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    add_outbox_trace_context()


def downgrade() -> None:
    drop_outbox_trace_context()
