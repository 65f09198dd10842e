"""Outbox rows that cannot be published are set aside with their error (servicekit.events.relay).

Revision ID: 0017
Revises: 0016
"""

from servicekit.db.foundation import add_outbox_set_aside, drop_outbox_set_aside

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    add_outbox_set_aside()


def downgrade() -> None:
    drop_outbox_set_aside()
