"""Mail outbox (contact notifications to administrators).

Revision ID: 0003
Revises: 0002
"""

from alembic import op
from servicekit.db.foundation import create_mail_outbox_table

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    create_mail_outbox_table()


def downgrade() -> None:
    op.drop_table("mail_outbox")
