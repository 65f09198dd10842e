"""Persisted GraphQL documents by SHA-256: stored by automatic persisted queries, or
registered from a manifest for allow-list mode (graphql_api/persisted.py).

Revision ID: 0010_persisted_queries
Revises: 0009_checkout_idempotency
"""

import sqlalchemy as sa
from alembic import op

revision = "0010_persisted_queries"
down_revision = "0009_checkout_idempotency"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "persisted_queries",
        sa.Column("sha256", sa.String(64), primary_key=True),
        sa.Column("document", sa.Text(), nullable=False),
        sa.Column("registered", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("persisted_queries")
