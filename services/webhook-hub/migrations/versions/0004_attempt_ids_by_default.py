"""Attempt ids made by the database, so the engine can COPY attempts without them.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.alter_column("delivery_attempts", "id", server_default=sa.text("gen_random_uuid()"))


def downgrade() -> None:
    op.alter_column("delivery_attempts", "id", server_default=None)
