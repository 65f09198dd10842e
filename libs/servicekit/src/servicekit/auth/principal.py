"""Who is calling: a bottom-floor value the dependencies make and the key cache keeps."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from servicekit.auth.api_keys import AccessLevel
from servicekit.errors import Forbidden


@dataclass(frozen=True)
class Principal:
    """Who is calling: the owner every resource is scoped to, and what they may do."""

    owner: str
    level: AccessLevel
    key_id: uuid.UUID | None = None
    email: str | None = None

    def require(self, level: AccessLevel) -> None:
        if not self.level.allows(level):
            raise Forbidden(f"This operation needs the '{level.value}' access level")
