"""Wire shapes of run logs."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from scraper_manager.models import LogLevel, RunLogLine

LINE_EXAMPLE: dict[str, Any] = {
    "id": 5012,
    "level": "warning",
    "at": "2026-11-22T10:00:04.120Z",
    "message": "request failed, retrying",
    "fields": {"url": "https://shop.example/p/9", "status": 503, "attempt": 1, "wait": 2.0},
}


class LogLineOut(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [LINE_EXAMPLE]})

    id: int
    level: LogLevel
    at: datetime
    message: str
    fields: dict[str, Any]

    @classmethod
    def of(cls, line: RunLogLine) -> LogLineOut:
        return cls(
            id=line.id, level=line.level, at=line.at, message=line.message, fields=line.fields
        )


class LogLineList(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"data": [LINE_EXAMPLE], "next_cursor": "5012"}]}
    )

    data: list[LogLineOut]
    next_cursor: str | None
