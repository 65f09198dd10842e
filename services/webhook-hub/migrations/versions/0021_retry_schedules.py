"""Retry schedule and timeout per subscription, with defaults per owner (issue 32, item 1).

- `subscriptions.retry_schedule` (the waits in whole seconds; null: not set) is added, and
  `subscriptions.timeout_seconds` becomes nullable with no default: null is "not set", which
  follows the owner's default, then the service's setting (10 s, the spec's default).
- Rows holding 10, the column's old default, become null: before this migration nothing told
  a 10 that was chosen from one that was left as it came, and both keep 10 s in effect unless
  their owner sets a default. Any other value was chosen and stays.
- `consumers.default_retry_schedule` and `consumers.default_timeout_seconds` hold an owner's
  defaults (null: not set).

Revision ID: 0021
Revises: 0020
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "subscriptions", sa.Column("retry_schedule", postgresql.ARRAY(sa.Integer()), nullable=True)
    )
    op.alter_column("subscriptions", "timeout_seconds", nullable=True, server_default=None)
    op.execute("UPDATE subscriptions SET timeout_seconds = NULL WHERE timeout_seconds = 10")
    op.add_column(
        "consumers",
        sa.Column("default_retry_schedule", postgresql.ARRAY(sa.Integer()), nullable=True),
    )
    op.add_column("consumers", sa.Column("default_timeout_seconds", sa.Integer(), nullable=True))


def downgrade() -> None:
    op.drop_column("consumers", "default_timeout_seconds")
    op.drop_column("consumers", "default_retry_schedule")
    op.execute("UPDATE subscriptions SET timeout_seconds = 10 WHERE timeout_seconds IS NULL")
    op.alter_column("subscriptions", "timeout_seconds", nullable=False)
    op.drop_column("subscriptions", "retry_schedule")
