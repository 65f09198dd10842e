"""Outbox rows that cannot be published are set aside with their error (servicekit.events.relay).

Revision ID: 0010_outbox_set_aside
Revises: 0009_dashboard_sessions
"""

from servicekit.db.foundation import add_outbox_set_aside, drop_outbox_set_aside

revision = "0010_outbox_set_aside"
down_revision = "0009_dashboard_sessions"
branch_labels = None
depends_on = None


def upgrade() -> None:
    add_outbox_set_aside()


def downgrade() -> None:
    drop_outbox_set_aside()
