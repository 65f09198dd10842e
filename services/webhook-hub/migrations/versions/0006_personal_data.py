"""Event types carry a visibility (`personal`: personal data of others), and consumers an
operator's approval to receive such types.

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "event_types",
        sa.Column("visibility", sa.String(16), nullable=False, server_default="public"),
    )
    op.add_column(
        "consumers",
        sa.Column(
            "personal_data_approved", sa.Boolean(), nullable=False, server_default=sa.false()
        ),
    )


def downgrade() -> None:
    op.drop_column("consumers", "personal_data_approved")
    op.drop_column("event_types", "visibility")
