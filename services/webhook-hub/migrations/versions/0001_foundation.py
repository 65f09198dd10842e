"""Foundation: API keys, outbox, processed events.

Revision ID: 0001
"""

from servicekit.db.foundation import create_foundation_tables, drop_foundation_tables

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    create_foundation_tables()


def downgrade() -> None:
    drop_foundation_tables()
