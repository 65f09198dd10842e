"""Portal sessions kept on the server, and the key behind each portal link.

Until now a portal session was a signed cookie holding owner and level: signing out, revoking
the key that opened it or changing that key's level ended nothing on the server. Now the cookie
carries a random token and `portal_sessions` keeps only its SHA-256 with the owner, the level,
the key the session stands on (`api_key_id`: the key signed in with, or the key that asked
for its link; none for an operator's `portal-link`), the service and its times. Every portal
request loads its row and checks the key is still live at the same level; sign-out deletes it,
the worker deletes expired rows (by `ix_portal_sessions_expires_at`). Deleting a key's row
deletes its sessions and links (the foreign keys cascade; keys are normally only revoked).

`portal_links.api_key_id` is the key that asked for a link, so a link of a key revoked
afterwards no longer signs in. Links issued before this revision have none and sign in as
before until they expire (an hour by default, a day at most). Sessions opened before it were
cookies only: they are refused once this is deployed (everyone signs in again, once).

Revision ID: 0016
Revises: 0015
"""

from servicekit.db.foundation import (
    add_link_issuer,
    create_page_sessions_table,
    drop_link_issuer,
    drop_page_sessions_table,
)

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    create_page_sessions_table("portal_sessions")
    add_link_issuer("portal_links")


def downgrade() -> None:
    drop_link_issuer("portal_links")
    drop_page_sessions_table("portal_sessions")
