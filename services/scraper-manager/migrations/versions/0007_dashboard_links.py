"""One-time dashboard sign-in links (the token's hash only).

Revision ID: 0007_dashboard_links
Revises: 0006_run_log
"""

import sqlalchemy as sa
from alembic import op

revision = "0007_dashboard_links"
down_revision = "0006_run_log"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "dashboard_links",
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("level", sa.String(16), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("token_hash"),
    )


def downgrade() -> None:
    op.drop_table("dashboard_links")
