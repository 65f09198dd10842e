"""Change detection between runs and incremental crawls: a scraper's `item_key` and
`revalidate`; a run's change counts and `not_modified` pages; `run_changes` (what a run
added, removed and changed against the previous successful run, computed in SQL at the end of
the run); `page_cache` (per scraper and page, the latest validators seen and what the page
gave: its items and links, reused when the site answers 304).

Revision ID: 0013_changes_and_revalidation
Revises: 0012_run_numbers
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0013_changes_and_revalidation"
down_revision = "0012_run_numbers"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("scrapers", sa.Column("item_key", sa.String(100), nullable=True))
    op.add_column(
        "scrapers",
        sa.Column("revalidate", sa.Boolean(), nullable=False, server_default=sa.true()),
    )
    op.add_column(
        "runs", sa.Column("not_modified", sa.Integer(), nullable=False, server_default="0")
    )
    # Null: not compared (no key, the first run with a key, or not a successful run).
    op.add_column("runs", sa.Column("changes", postgresql.JSONB(), nullable=True))
    op.create_table(
        "run_changes",
        sa.Column("id", sa.BigInteger(), primary_key=True),
        sa.Column(
            "run_id", sa.Integer(), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("item", postgresql.JSONB(), nullable=False),
        sa.Column("fields", postgresql.JSONB(), nullable=True),
    )
    # Keyset pages of one run, all kinds or one.
    op.create_index("ix_run_changes_run_kind_id", "run_changes", ["run_id", "kind", "id"])
    op.create_index("ix_run_changes_run_id_id", "run_changes", ["run_id", "id"])
    op.create_table(
        "page_cache",
        sa.Column(
            "scraper_id",
            sa.Integer(),
            sa.ForeignKey("scrapers.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("url", sa.Text(), nullable=False),  # canonical
        sa.Column("page_url", sa.Text(), nullable=False),  # as fetched
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("etag", sa.Text(), nullable=True),
        sa.Column("last_modified", sa.Text(), nullable=True),
        sa.Column("items", postgresql.JSONB(), nullable=False),
        # Null: the page was at the depth limit, its links were not read.
        sa.Column("links", postgresql.JSONB(), nullable=True),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("scraper_id", "url"),
    )
    op.create_index("ix_page_cache_seen_at", "page_cache", ["seen_at"])


def downgrade() -> None:
    op.drop_table("page_cache")
    op.drop_table("run_changes")
    op.drop_column("runs", "changes")
    op.drop_column("runs", "not_modified")
    op.drop_column("scrapers", "revalidate")
    op.drop_column("scrapers", "item_key")
