"""One politeness budget per site: `host_budgets`, a row per crawled host holding the last
request slot granted to any run on any worker (scraper_manager.crawler.host_budget).

Revision ID: 0015_host_budgets
Revises: 0014_browser_render
"""

import sqlalchemy as sa
from alembic import op

revision = "0015_host_budgets"
down_revision = "0014_browser_render"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "host_budgets",
        sa.Column("host", sa.String(255), primary_key=True),
        sa.Column("last_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("host_budgets")
