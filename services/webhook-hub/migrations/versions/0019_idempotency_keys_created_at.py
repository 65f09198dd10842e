"""An index on `idempotency_keys.created_at`, so the worker prunes keys past their window in
batches by the index rather than scanning the table (producer_events/pruning.py).

Built concurrently: the API keeps claiming keys meanwhile.

Revision ID: 0019
Revises: 0018
"""

from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.get_context().autocommit_block():
        # One a failed build left invalid is built again.
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS ix_idempotency_keys_created_at")
        op.execute(
            "CREATE INDEX CONCURRENTLY ix_idempotency_keys_created_at"
            " ON idempotency_keys (created_at)"
        )


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS ix_idempotency_keys_created_at")
