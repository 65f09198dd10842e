"""Who an API key is, remembered by a process for a few seconds (`API_KEY_CACHE_SECONDS`).

Every authenticated request read its key's row: a database round trip (and a transaction)
per request, the larger part of what a small request like `POST /webhooks/events` cost. A
service that sets the seconds (0, the default, keeps no cache) remembers each key it found
active for that long, by the key's hash (never the key itself). The price: a key revoked,
or given another level, by another process (another API replica, the operators' CLI) keeps
working in this process for at most those seconds. In the process that revokes or changes
it, it stops at once: the key's id is barred (`forget`) for the cache's lifetime of an
entry, so a lookup that read the row just before the change committed cannot put it back.
Keys that are not found are never remembered (a wrong key always reaches the database).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from servicekit.auth.principal import Principal

# Beyond this many keys the cache starts again empty rather than grow (a flood of distinct
# valid keys is not a real load; the next lookup of each fills it again).
MAX_KEYS = 10_000


class ApiKeyCache:
    def __init__(
        self,
        seconds: float,
        *,
        max_keys: int = MAX_KEYS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.seconds = seconds
        self._max_keys = max_keys
        self._clock = clock
        self._entries: dict[str, tuple[float, Principal]] = {}
        self._barred: dict[uuid.UUID, float] = {}

    def get(self, key_hash: str) -> Principal | None:
        """The principal of the key with this hash, if remembered and still fresh."""
        entry = self._entries.get(key_hash)
        if entry is None:
            return None
        expires, principal = entry
        if expires <= self._clock() or self._is_barred(principal.key_id):
            del self._entries[key_hash]
            return None
        return principal

    def put(self, key_hash: str, principal: Principal) -> None:
        """Remember an active key's principal, unless its key was changed here meanwhile."""
        if self._is_barred(principal.key_id):
            return
        if len(self._entries) >= self._max_keys:
            self._entries.clear()
        self._entries[key_hash] = (self._clock() + self.seconds, principal)

    def forget(self, key_id: uuid.UUID) -> None:
        """The key was revoked or changed: look it up again from now on, for as long as an
        entry read before the change committed could still be remembered."""
        now = self._clock()
        self._barred = {k: until for k, until in self._barred.items() if until > now}
        self._barred[key_id] = now + self.seconds
        self._entries = {
            key_hash: entry
            for key_hash, entry in self._entries.items()
            if entry[1].key_id != key_id
        }

    def _is_barred(self, key_id: uuid.UUID | None) -> bool:
        if not self._barred or key_id is None:
            return False
        until = self._barred.get(key_id)
        return until is not None and until > self._clock()
