"""How many live streams may be open: per page session, per owner and per process. Pure
decisions (no I/O, no clock), so the caps are unit-tested as rules."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from enum import StrEnum


@dataclass(frozen=True)
class StreamCaps:
    per_session: int
    per_owner: int
    per_process: int


class CapReached(StrEnum):
    SESSION = "session"
    OWNER = "owner"
    PROCESS = "process"


def refusal_text(cap: CapReached, caps: StreamCaps) -> str:
    """What a refused stream is told (the 429's message)."""
    if cap is CapReached.SESSION:
        return (
            f"This session already has {caps.per_session} live views open, the most it may: "
            "close one, then reload this page."
        )
    if cap is CapReached.OWNER:
        return (
            f"Your account already has {caps.per_owner} live views open, the most it may: "
            "close one, then reload this page."
        )
    return "The service has as many live views open as it can serve: reload this page later."


class StreamCounts:
    """The open streams, counted per session, per owner and in all. `admit` counts a stream in
    when every cap has room (the narrowest cap is named when one has none); `release` counts
    it out. The caller pairs each admitted stream with exactly one release."""

    def __init__(self, caps: StreamCaps) -> None:
        self.caps = caps
        self.total = 0
        self._sessions: Counter[str] = Counter()
        self._owners: Counter[str] = Counter()

    def admit(self, session_id: str, owner: str) -> CapReached | None:
        if self._sessions[session_id] >= self.caps.per_session:
            return CapReached.SESSION
        if self._owners[owner] >= self.caps.per_owner:
            return CapReached.OWNER
        if self.total >= self.caps.per_process:
            return CapReached.PROCESS
        self._sessions[session_id] += 1
        self._owners[owner] += 1
        self.total += 1
        return None

    def release(self, session_id: str, owner: str) -> None:
        # Counter keys are dropped at zero, so sessions that come and go leave nothing behind.
        _decrement(self._sessions, session_id)
        _decrement(self._owners, owner)
        self.total = max(self.total - 1, 0)

    def of_session(self, session_id: str) -> int:
        return self._sessions[session_id]

    def of_owner(self, owner: str) -> int:
        return self._owners[owner]

    @property
    def tracked_keys(self) -> int:
        """Sessions and owners with a count kept (zero once every stream is released)."""
        return len(self._sessions) + len(self._owners)


def _decrement(counts: Counter[str], key: str) -> None:
    left = counts[key] - 1
    if left > 0:
        counts[key] = left
    else:
        counts.pop(key, None)


def fire_delay(last_fired: float, now: float, min_interval: float) -> float:
    """How long a key's streams wait before they look at a change noticed at `now`: at once
    (0.0) unless they looked less than `min_interval` ago, then until that interval is over.
    Changes noticed meanwhile ride on the same look, so a key looks at most once per interval
    however many changes it has."""
    return max(last_fired + min_interval - now, 0.0)
