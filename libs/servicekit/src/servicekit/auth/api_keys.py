"""API keys: `<prefix>_<random>`, stored only as SHA-256, compared in constant time."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from enum import StrEnum

KEY_RANDOM_BYTES = 32
DISPLAY_PREFIX_LENGTH = 12


class AccessLevel(StrEnum):
    READ = "read"
    WRITE = "write"
    ADMIN = "admin"
    # Above every consumer: acts across owners (webhook-hub: events for any tenant, platform
    # types). Issued only by a service's CLI, never over the API (see ISSUED_OVER_API).
    OPERATOR = "operator"

    @property
    def rank(self) -> int:
        return _RANKS[self]

    def allows(self, required: AccessLevel) -> bool:
        return self.rank >= required.rank


_RANKS = {
    AccessLevel.READ: 1,
    AccessLevel.WRITE: 2,
    AccessLevel.ADMIN: 3,
    AccessLevel.OPERATOR: 4,
}
# The levels a key may be given by `POST /api-keys` (and by a CLI that does not opt in to
# more): an owner's admin key can never mint a credential that reaches beyond its owner.
ISSUED_OVER_API = (AccessLevel.READ, AccessLevel.WRITE, AccessLevel.ADMIN)


def generate_api_key(prefix: str) -> str:
    """A recognisable, high-entropy key such as `whk_3q2...`; shown once, never stored."""
    return f"{prefix}_{secrets.token_urlsafe(KEY_RANDOM_BYTES)}"


def hash_api_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def display_prefix(key: str) -> str:
    """Enough of the key to recognise it in a listing, far too little to use it."""
    return key[:DISPLAY_PREFIX_LENGTH]


def key_matches(key: str, stored_hash: str) -> bool:
    return hmac.compare_digest(hash_api_key(key), stored_hash)
