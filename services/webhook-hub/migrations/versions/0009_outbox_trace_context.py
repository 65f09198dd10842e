"""Outbox rows keep the W3C trace context of the span that recorded them (servicekit.tracing).

Revision ID: 0009
Revises: 0008
"""

from servicekit.db.foundation import add_outbox_trace_context, drop_outbox_trace_context

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    add_outbox_trace_context()


def downgrade() -> None:
    drop_outbox_trace_context()
