"""When each persisted query was last used, so documents stored by automatic persisted
queries and no longer sent can be pruned (graphql_api/persisted.py); rows already stored
count as used now.

Revision ID: 0011_persisted_query_use
Revises: 0010_persisted_queries
"""

import sqlalchemy as sa
from alembic import op

revision = "0011_persisted_query_use"
down_revision = "0010_persisted_queries"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "persisted_queries",
        sa.Column(
            "last_used_at",
            sa.DateTime(timezone=True),
            nullable=False,
            server_default=sa.func.now(),
        ),
    )
    # The pruning's scan: only documents a manifest did not register can go.
    op.create_index(
        "ix_persisted_queries_unregistered_last_used_at",
        "persisted_queries",
        ["last_used_at"],
        postgresql_where=sa.text("NOT registered"),
    )


def downgrade() -> None:
    op.drop_index("ix_persisted_queries_unregistered_last_used_at", "persisted_queries")
    op.drop_column("persisted_queries", "last_used_at")
