"""Run logs: the lines a crawl writes about itself, read in id order per run.

Revision ID: 0006_run_log
Revises: 0005_webhook_registration
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0006_run_log"
down_revision = "0005_webhook_registration"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "run_log_lines",
        sa.Column("id", sa.BigInteger(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("level", sa.String(8), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("message", sa.String(), nullable=False),
        sa.Column("fields", postgresql.JSONB(), server_default="{}", nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    # Keyset reads of one run's log, and retention's deletes by age.
    op.create_index("ix_run_log_lines_run_id_id", "run_log_lines", ["run_id", "id"])
    op.create_index("ix_run_log_lines_at", "run_log_lines", ["at"])


def downgrade() -> None:
    op.drop_table("run_log_lines")
