"""Ordered delivery by key (issue 32, item 3).

- `subscriptions.ordering`: null (unordered) or `{"key": "<CEL>" | null}`.
- `deliveries.order_key`, `order_seq`: an ordered delivery's key (text) and its event's
  JetStream stream sequence (the publication order); null for unordered ones.
  `held_by`, `held_since`, `held_until`: the delivery of its key it waited behind while that
  one failed, and for how long (written when the holder succeeded or gave up).
- `ordered_pending`: the pending ordered deliveries, one row each, keyed by (subscription,
  key, sequence). Not partitioned (the log is, by time): the claim walks its keys with one
  B-tree (a loose index scan) and takes each key's head, which a scan of every partition's
  index could not do at claim rate. A row leaves it when its delivery succeeds or gives up.

Revision ID: 0021
Revises: 0020
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("subscriptions", sa.Column("ordering", postgresql.JSONB(), nullable=True))
    # Columns without defaults: adding them to the partitioned log rewrites nothing.
    op.add_column("deliveries", sa.Column("order_key", sa.Text(), nullable=True))
    op.add_column("deliveries", sa.Column("order_seq", sa.BigInteger(), nullable=True))
    op.add_column("deliveries", sa.Column("held_by", sa.Uuid(), nullable=True))
    op.add_column("deliveries", sa.Column("held_since", sa.DateTime(timezone=True), nullable=True))
    op.add_column("deliveries", sa.Column("held_until", sa.DateTime(timezone=True), nullable=True))
    op.create_table(
        "ordered_pending",
        sa.Column(
            "subscription_id",
            sa.Uuid(),
            sa.ForeignKey("subscriptions.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("order_key", sa.Text(), nullable=False),
        sa.Column("order_seq", sa.BigInteger(), nullable=False),
        sa.Column("delivery_id", sa.Uuid(), nullable=False),
        # The delivery's partition key: the claim reads its row in one partition.
        sa.Column("log_time", sa.DateTime(timezone=True), nullable=False),
        # Set when the key's head first fails: the deliveries behind it are held from then.
        sa.Column("blocked_since", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("subscription_id", "order_key", "order_seq"),
    )


def downgrade() -> None:
    op.drop_table("ordered_pending")
    for column in ("held_until", "held_since", "held_by", "order_seq", "order_key"):
        op.drop_column("deliveries", column)
    op.drop_column("subscriptions", "ordering")
