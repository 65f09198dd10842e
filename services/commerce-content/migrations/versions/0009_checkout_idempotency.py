"""Idempotency keys of checkouts: one row per (caller, key), claimed in the order's
transaction, holding the first answer (orders/idempotency.py).

Revision ID: 0009_checkout_idempotency
Revises: 0008_retention_indexes
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0009_checkout_idempotency"
down_revision = "0008_retention_indexes"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "checkout_idempotency_keys",
        sa.Column("scope", sa.String(300), primary_key=True),
        sa.Column("key", sa.String(255), primary_key=True),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column(
            "order_id",
            postgresql.UUID(as_uuid=True),
            sa.ForeignKey("orders.id", ondelete="CASCADE"),
            nullable=True,
        ),
        sa.Column("payment_url", sa.String(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    # Pruning walks keys by age (servicekit.retention).
    op.create_index(
        "ix_checkout_idempotency_keys_created_at", "checkout_idempotency_keys", ["created_at"]
    )


def downgrade() -> None:
    op.drop_index("ix_checkout_idempotency_keys_created_at", table_name="checkout_idempotency_keys")
    op.drop_table("checkout_idempotency_keys")
