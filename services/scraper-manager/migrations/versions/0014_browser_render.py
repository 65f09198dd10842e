"""A scraper's `render`: "http" (the document as fetched) or "browser" (headless Chromium).

Revision ID: 0014_browser_render
Revises: 0013_changes_and_revalidation
"""

import sqlalchemy as sa
from alembic import op

revision = "0014_browser_render"
down_revision = "0013_changes_and_revalidation"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "scrapers",
        sa.Column("render", sa.String(16), nullable=False, server_default="http"),
    )


def downgrade() -> None:
    op.drop_column("scrapers", "render")
