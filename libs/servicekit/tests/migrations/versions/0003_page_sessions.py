"""The sample pages app's page sessions (tests/pages_app.py), as a service creates its own.

Revision ID: 0003
Revises: 0002
"""

from servicekit.db.foundation import create_page_sessions_table, drop_page_sessions_table

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    create_page_sessions_table("kit_page_sessions")


def downgrade() -> None:
    drop_page_sessions_table("kit_page_sessions")
