"""Retention of the mail outbox: an index on when a message was sent or dead-lettered
(servicekit.retention deletes such mail past `MAIL_RETENTION_DAYS`).

Revision ID: 0018
Revises: 0017
"""

from servicekit.db.foundation import (
    add_mail_outbox_finished_index,
    drop_mail_outbox_finished_index,
)

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    add_mail_outbox_finished_index()


def downgrade() -> None:
    drop_mail_outbox_finished_index()
