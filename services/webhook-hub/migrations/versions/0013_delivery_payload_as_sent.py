"""A delivery's payload is kept as the JSON text it was first sent with (`json`, not `jsonb`):
every attempt, retries included, sends the same body bytes, and the portal can show the exact
request. `jsonb` reordered keys and respaced the text, so a retry's body differed from the
first attempt's. Cheaper too: `json` stores the text as validated, and reads it back as is.

Rows stored before this keep `jsonb`'s text, which is what their retries sent.

Revision ID: 0013
Revises: 0012
"""

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE deliveries ALTER COLUMN payload TYPE json USING payload::json")


def downgrade() -> None:
    op.execute("ALTER TABLE deliveries ALTER COLUMN payload TYPE jsonb USING payload::jsonb")
