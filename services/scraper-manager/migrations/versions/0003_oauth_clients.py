"""OAuth2 clients of the client-credentials grant.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "oauth_clients",
        sa.Column("client_id", sa.String(64), primary_key=True),
        sa.Column("secret_hash", sa.String(64), nullable=False),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("level", sa.String(16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True)),
        sa.CheckConstraint("level IN ('read', 'write', 'admin')", name="ck_oauth_clients_level"),
    )
    op.create_index("ix_oauth_clients_owner", "oauth_clients", ["owner"])


def downgrade() -> None:
    op.drop_table("oauth_clients")
