"""Outbox rows keep the W3C trace context of the span that recorded them (servicekit.tracing).

Revision ID: 0010
Revises: 0009
"""

from servicekit.db.foundation import add_outbox_trace_context, drop_outbox_trace_context

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    add_outbox_trace_context()


def downgrade() -> None:
    drop_outbox_trace_context()
