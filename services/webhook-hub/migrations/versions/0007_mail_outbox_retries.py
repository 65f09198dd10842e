"""Mail outbox: backed-off retries and dead letters (servicekit.mail_outbox).

Revision ID: 0007
Revises: 0006
"""

from servicekit.db.foundation import add_mail_outbox_retries, drop_mail_outbox_retries

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    add_mail_outbox_retries()


def downgrade() -> None:
    drop_mail_outbox_retries()
