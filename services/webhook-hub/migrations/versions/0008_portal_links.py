"""Portal links: one-time tokens (kept as SHA-256) that open a portal session.

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "portal_links",
        sa.Column("token_hash", sa.String(64), primary_key=True),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("level", sa.String(16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=True),
    )
    # Expired links are only kept for the "expired" page; this finds them for clean-up.
    op.create_index("ix_portal_links_expires_at", "portal_links", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_portal_links_expires_at", "portal_links")
    op.drop_table("portal_links")
