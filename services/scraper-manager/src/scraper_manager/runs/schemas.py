"""Wire shapes of runs and results."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel

from scraper_manager.models import Item, Run, RunStatus, RunTrigger


class RunStats(BaseModel):
    pages_fetched: int
    items_collected: int
    requests_failed: int
    retries: int
    bytes: int
    status_counts: dict[str, int]
    duration_seconds: float | None


class RunOut(BaseModel):
    id: int
    scraper_id: int
    status: RunStatus
    trigger: RunTrigger
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    items_collected: int
    last_error: str | None
    stats: RunStats

    @classmethod
    def of(cls, run: Run) -> RunOut:
        duration = (
            (run.finished_at - run.started_at).total_seconds()
            if run.started_at and run.finished_at
            else None
        )
        return cls(
            id=run.id,
            scraper_id=run.scraper_id,
            status=run.status,
            trigger=run.trigger,
            created_at=run.created_at,
            started_at=run.started_at,
            finished_at=run.finished_at,
            items_collected=run.items_collected,
            last_error=run.last_error,
            stats=RunStats(
                pages_fetched=run.pages_fetched,
                items_collected=run.items_collected,
                requests_failed=run.requests_failed,
                retries=run.retries,
                bytes=run.bytes_received,
                status_counts=run.status_counts,
                duration_seconds=duration,
            ),
        )


class RunList(BaseModel):
    data: list[RunOut]
    next_cursor: str | None


class ItemOut(BaseModel):
    id: int
    run_id: int
    url: str
    data: dict[str, Any]
    created_at: datetime

    @classmethod
    def of(cls, item: Item) -> ItemOut:
        return cls(
            id=item.id, run_id=item.run_id, url=item.url, data=item.data, created_at=item.created_at
        )


class ItemList(BaseModel):
    run_id: int | None
    data: list[ItemOut]
    next_cursor: str | None
