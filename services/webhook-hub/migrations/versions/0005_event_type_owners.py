"""Event types registered over HTTP record their owner (null: declared by a service), and
API keys may have the `operator` level (issued by the CLI only).

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("event_types", sa.Column("owner", sa.String(200), nullable=True))
    op.drop_constraint("ck_api_keys_level", "api_keys", type_="check")
    op.create_check_constraint(
        "ck_api_keys_level", "api_keys", "level IN ('read', 'write', 'admin', 'operator')"
    )


def downgrade() -> None:
    op.execute("DELETE FROM api_keys WHERE level = 'operator'")
    op.drop_constraint("ck_api_keys_level", "api_keys", type_="check")
    op.create_check_constraint(
        "ck_api_keys_level", "api_keys", "level IN ('read', 'write', 'admin')"
    )
    op.drop_column("event_types", "owner")
