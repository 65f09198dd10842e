"""Outbox rows that cannot be published are set aside with their error (servicekit.events.relay).

Revision ID: 0009_outbox_set_aside
Revises: 0008_outbox_trace_context
"""

from servicekit.db.foundation import add_outbox_set_aside, drop_outbox_set_aside

revision = "0009_outbox_set_aside"
down_revision = "0008_outbox_trace_context"
branch_labels = None
depends_on = None


def upgrade() -> None:
    add_outbox_set_aside()


def downgrade() -> None:
    drop_outbox_set_aside()
