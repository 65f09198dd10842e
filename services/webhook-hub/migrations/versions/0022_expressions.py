"""A subscription's CEL `filter` and `transform` (issue 32): the expressions' source as the
owner saved it, compiled by the API when saved and by the worker once per subscription.

Nullable, no default: adding them rewrites nothing, and a subscription without them costs
dispatch one attribute test.

`subscription_expression_tallies`: what they did, counted (events filtered out, errors),
flushed by each worker every few seconds (dispatch/expression_tally.py). No foreign key: a
subscription deleted leaves a row nobody reads (a few counters; a trigger as for
deliveries would be more machinery than they deserve).

Revision ID: 0021
Revises: 0020
"""

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("subscriptions", sa.Column("filter", sa.Text(), nullable=True))
    op.add_column("subscriptions", sa.Column("transform", sa.Text(), nullable=True))
    op.create_table(
        "subscription_expression_tallies",
        sa.Column("subscription_id", sa.Uuid(), primary_key=True),
        sa.Column("filtered", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("filter_errors", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("transform_errors", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("last_error_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("subscription_expression_tallies")
    op.drop_column("subscriptions", "transform")
    op.drop_column("subscriptions", "filter")
