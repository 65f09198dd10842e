"""What every batch loop of a worker shares: telling an item's failure from an outage, and
the progress each loop reports for the worker's `/readyz`.

A batch loop (the outbox relay, dispatch, the mail outbox, the scheduler, ...) handles each
item on its own: an item that raises is recorded as failed or set aside, with an error line
naming it and the loop, and the rest of its batch goes on. An *outage* (the database or NATS
unreachable, a timeout) is not the item's fault: the whole batch waits and is tried again.
`is_outage` decides which is which.

Each loop reports a beat when it completes an iteration, even an empty one, with the longest
it may then wait before the next (its poll interval). A loop whose last beat is older than
`worker_loop_stall_seconds` plus that wait has stalled, and `/readyz` names it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import nats.errors
import nats.js.errors
import psycopg
import sqlalchemy.exc

# Failures of the connection or of the server, not of what was sent over it. The database's
# refusals of a value (a constraint, a value it cannot store, a trigger's RAISE: DataError,
# IntegrityError, SQLSTATE P0) are the item's; a lost connection, a timeout, a serialization
# failure are the moment's, and a statement wrong for every row is the deployment's
# (`_DEPLOYMENT_SQLSTATES`): setting every item aside for it would set them all aside.
_OUTAGES: tuple[type[BaseException], ...] = (
    TimeoutError,
    ConnectionError,
    OSError,
    sqlalchemy.exc.OperationalError,
    sqlalchemy.exc.InterfaceError,
    sqlalchemy.exc.TimeoutError,  # the pool's: no connection to be had
    psycopg.OperationalError,
    psycopg.InterfaceError,
    nats.errors.ConnectionClosedError,
    nats.errors.ConnectionDrainingError,
    nats.errors.ConnectionReconnectingError,
    nats.errors.NoServersError,
    nats.errors.NoRespondersError,
    nats.errors.OutboundBufferLimitError,
    nats.errors.StaleConnectionError,
    nats.errors.TimeoutError,
    nats.js.errors.ServiceUnavailableError,
    nats.js.errors.ServerError,
    nats.js.errors.NoStreamResponseError,
    nats.js.errors.TooManyStalledMsgsError,
)


# SQLSTATE classes of a statement that fails whatever its values: 42 (an undefined column or
# table: a migration not applied yet; a privilege missing), 58 (system error), XX (internal).
_DEPLOYMENT_SQLSTATES = ("42", "58", "XX")


def is_outage(exc: BaseException) -> bool:
    """Whether `exc` says the database or NATS could not be reached (the batch waits and is
    tried again) rather than that this item cannot be handled (it is set aside)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, sqlalchemy.exc.DBAPIError) and current.connection_invalidated:
            return True
        if isinstance(current, _OUTAGES):
            return True
        # SQLAlchemy's error holds the driver's as `orig` (and as its cause).
        driver_error = getattr(current, "orig", None) or current
        sqlstate = getattr(driver_error, "sqlstate", None)
        if isinstance(sqlstate, str) and sqlstate[:2] in _DEPLOYMENT_SQLSTATES:
            return True
        if isinstance(current, nats.js.errors.APIError) and (current.code or 500) >= 500:
            return True
        current = current.__cause__ or current.__context__
    return False


def describe(exc: BaseException, limit: int = 1000) -> str:
    """An error as stored beside the item it failed: its repr, cut to `limit` characters."""
    try:
        text = repr(exc)
    except Exception:  # a repr that raises is no reason to lose the record
        text = type(exc).__name__
    return text[:limit]


@dataclass(frozen=True)
class Beat:
    """A loop's last completed iteration (monotonic seconds) and the longest it said it
    would wait before the next one."""

    at: float
    idle: float


def stalled_loops(beats: Mapping[str, Beat], now: float, limit: float) -> list[str]:
    """The loops that made no progress for `limit` seconds beyond their announced wait,
    by name."""
    return sorted(name for name, beat in beats.items() if now - beat.at > limit + beat.idle)


def readiness(
    database: bool, nats_connected: bool, stalled: list[str]
) -> tuple[int, dict[str, object]]:
    """`/readyz`'s status code and body from its checks."""
    checks = {"database": database, "nats": nats_connected, "loops": not stalled}
    ready = all(checks.values())
    body: dict[str, object] = {"status": "ready" if ready else "not_ready", "checks": checks}
    if stalled:
        body["stalled_loops"] = stalled
    return (200 if ready else 503), body


class LoopProgress:
    """The beats of a worker's loops (one per runtime). A loop beats once as it starts, so
    one stuck before its first iteration ends is noticed too."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._beats: dict[str, Beat] = {}

    def beat(self, loop: str, idle: float = 0.0) -> None:
        """`loop` completed an iteration (or started) and may now wait up to `idle` seconds."""
        self._beats[loop] = Beat(self._clock(), max(idle, 0.0))

    def forget(self, loop: str) -> None:
        """`loop` ended: it is no longer watched."""
        self._beats.pop(loop, None)

    def stalled(self, limit: float) -> list[str]:
        return stalled_loops(self._beats, self._clock(), limit)

    @property
    def loops(self) -> list[str]:
        return sorted(self._beats)
