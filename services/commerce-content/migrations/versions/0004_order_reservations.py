"""Orders hold their stock from checkout until paid or expired.

Revision ID: 0004_order_reservations
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004_order_reservations"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Orders placed before this hold no reservation (both null): their payment takes the
    # stock if it is still there.
    op.add_column("orders", sa.Column("stock_reserved_at", sa.DateTime(timezone=True)))
    op.add_column("orders", sa.Column("expires_at", sa.DateTime(timezone=True)))
    op.create_index(
        "ix_orders_reservation_expiry",
        "orders",
        ["expires_at"],
        postgresql_where=sa.text("status = 'pending' AND stock_reserved_at IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_orders_reservation_expiry", table_name="orders")
    op.drop_column("orders", "expires_at")
    op.drop_column("orders", "stock_reserved_at")
