"""Outbox rows keep the W3C trace context of the span that recorded them (servicekit.tracing).

Revision ID: 0006_outbox_trace_context
Revises: 0005_mail_outbox_retries
"""

from servicekit.db.foundation import add_outbox_trace_context, drop_outbox_trace_context

revision = "0006_outbox_trace_context"
down_revision = "0005_mail_outbox_retries"
branch_labels = None
depends_on = None


def upgrade() -> None:
    add_outbox_trace_context()


def downgrade() -> None:
    drop_outbox_trace_context()
