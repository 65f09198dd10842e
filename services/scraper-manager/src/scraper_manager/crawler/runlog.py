"""A run's log as the crawler writes it: lines appended in memory (a list append on the hot
path), taken in batches by the runner's heartbeat and written with one statement. Bounded:
past `cap` lines a run keeps only a count, written once at the end as "N lines dropped"."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from scraper_manager.models import LogLevel

# Long values (URLs, error texts from crawled servers) are cut: a log line is not a dump.
MAX_TEXT = 500


@dataclass(frozen=True)
class LogLine:
    level: LogLevel
    at: datetime
    message: str
    fields: dict[str, Any] = field(default_factory=dict)


def _short(value: Any) -> Any:
    return value[:MAX_TEXT] if isinstance(value, str) else value


def without_credentials(url: str) -> str:
    """A proxy URL as it may be logged: its user and password removed."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit(parts._replace(netloc=netloc))


class RunLog:
    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.kept = 0
        self.dropped = 0
        self._pending: list[LogLine] = []
        self._closed = False

    def add(self, level: LogLevel, message: str, **fields: Any) -> None:
        if self._closed:
            return
        if self.kept >= self.cap:
            self.dropped += 1
            return
        self.kept += 1
        at = datetime.now(UTC)
        self._pending.append(LogLine(level, at, message, {k: _short(v) for k, v in fields.items()}))

    def info(self, message: str, **fields: Any) -> None:
        self.add(LogLevel.INFO, message, **fields)

    def warning(self, message: str, **fields: Any) -> None:
        self.add(LogLevel.WARNING, message, **fields)

    def error(self, message: str, **fields: Any) -> None:
        self.add(LogLevel.ERROR, message, **fields)

    def take(self) -> list[LogLine]:
        """The lines not written yet (the caller writes them)."""
        batch, self._pending = self._pending, []
        return batch

    def close(self) -> None:
        """No more lines; the count of dropped ones becomes the last (beyond the cap)."""
        if self.dropped and not self._closed:
            self._pending.append(
                LogLine(
                    LogLevel.WARNING,
                    datetime.now(UTC),
                    f"{self.dropped} lines dropped",
                    {"dropped": self.dropped, "cap": self.cap},
                )
            )
        self._closed = True


def retention_cutoff(now: datetime, retention_days: int) -> datetime:
    """Log lines written before this moment are pruned."""
    return now - timedelta(days=retention_days)
