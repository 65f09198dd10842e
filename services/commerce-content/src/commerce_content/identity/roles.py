"""Roles, ordered: ADMIN > MANAGER > USER > GUEST."""

from __future__ import annotations

from enum import StrEnum


class Role(StrEnum):
    ADMIN = "admin"
    MANAGER = "manager"
    USER = "user"
    GUEST = "guest"

    @property
    def rank(self) -> int:
        return _RANKS[self]

    def allows(self, required: Role) -> bool:
        return self.rank >= required.rank


_RANKS = {Role.GUEST: 0, Role.USER: 1, Role.MANAGER: 2, Role.ADMIN: 3}
