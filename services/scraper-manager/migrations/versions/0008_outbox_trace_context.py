"""Outbox rows keep the W3C trace context of the span that recorded them (servicekit.tracing).

Revision ID: 0008_outbox_trace_context
Revises: 0007_dashboard_links
"""

from servicekit.db.foundation import add_outbox_trace_context, drop_outbox_trace_context

revision = "0008_outbox_trace_context"
down_revision = "0007_dashboard_links"
branch_labels = None
depends_on = None


def upgrade() -> None:
    add_outbox_trace_context()


def downgrade() -> None:
    drop_outbox_trace_context()
