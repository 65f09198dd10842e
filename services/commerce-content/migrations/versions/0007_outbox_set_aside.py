"""Outbox rows that cannot be published are set aside with their error (servicekit.events.relay).

Revision ID: 0007_outbox_set_aside
Revises: 0006_outbox_trace_context
"""

from servicekit.db.foundation import add_outbox_set_aside, drop_outbox_set_aside

revision = "0007_outbox_set_aside"
down_revision = "0006_outbox_trace_context"
branch_labels = None
depends_on = None


def upgrade() -> None:
    add_outbox_set_aside()


def downgrade() -> None:
    drop_outbox_set_aside()
