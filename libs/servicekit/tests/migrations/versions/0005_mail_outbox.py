"""The mail outbox with its retries and retention's index, as the services have it.

Revision ID: 0005
Revises: 0004
"""

from alembic import op
from servicekit.db.foundation import (
    add_mail_outbox_finished_index,
    add_mail_outbox_retries,
    create_mail_outbox_table,
)

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    create_mail_outbox_table()
    add_mail_outbox_retries()
    add_mail_outbox_finished_index()


def downgrade() -> None:
    op.drop_table("mail_outbox")
