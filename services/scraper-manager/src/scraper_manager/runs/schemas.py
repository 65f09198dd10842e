"""Wire shapes of runs and results."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from scraper_manager.events import ChangeCounts
from scraper_manager.models import ChangeKind, Item, Run, RunChange, RunStatus, RunTrigger

RUN_EXAMPLE: dict[str, Any] = {
    "id": 17,
    "scraper_id": 4,
    "number": 3,
    "status": "completed",
    "trigger": "manual",
    "created_at": "2026-11-22T10:00:00Z",
    "started_at": "2026-11-22T10:00:01Z",
    "finished_at": "2026-11-22T10:01:30Z",
    "items_collected": 120,
    "last_error": None,
    "stats": {
        "pages_fetched": 40,
        "items_collected": 120,
        "requests_failed": 1,
        "retries": 2,
        "bytes": 1843200,
        "status_counts": {"200": 40, "503": 1},
        "duration_seconds": 89.0,
        "not_modified": 12,
        "changes": {
            "compared_run_id": 16,
            "added": 1,
            "removed": 0,
            "changed": 1,
            "duplicates": 0,
            "unkeyed": 0,
        },
    },
}
ITEM_EXAMPLE: dict[str, Any] = {
    "id": 1001,
    "run_id": 17,
    "url": "https://shop.example/catalog?page=1",
    "data": {"name": "Mug", "price": "12.00", "link": "/p/mug"},
    "created_at": "2026-11-22T10:00:02Z",
}


class RunStats(BaseModel):
    pages_fetched: int
    items_collected: int
    requests_failed: int
    retries: int
    bytes: int
    status_counts: dict[str, int]
    duration_seconds: float | None
    not_modified: int = Field(
        description="Pages answered 304 whose stored items and links were reused"
    )
    changes: ChangeCounts | None = Field(
        description=(
            "The comparison with the previous successful run by the scraper's item_key; null "
            "when not compared (no item_key, or the run did not complete)"
        )
    )


class RunOut(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [RUN_EXAMPLE]})

    id: int
    scraper_id: int
    number: int = Field(description="The run's number among its scraper's runs: 1, 2, 3, ...")
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
            number=run.number,
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
                not_modified=run.not_modified,
                changes=None if run.changes is None else ChangeCounts.model_validate(run.changes),
            ),
        )


class RunList(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"data": [RUN_EXAMPLE], "next_cursor": "17"}]}
    )

    data: list[RunOut]
    next_cursor: str | None


class ItemOut(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [ITEM_EXAMPLE]})

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
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"run_id": 17, "data": [ITEM_EXAMPLE], "next_cursor": "1001"}]
        }
    )

    run_id: int | None
    data: list[ItemOut]
    next_cursor: str | None


CHANGE_EXAMPLE: dict[str, Any] = {
    "id": 5001,
    "kind": "changed",
    "key": "sku-1",
    "item": {"url": "https://shop.example/p/1", "sku": "sku-1", "price": "11.00"},
    "fields": {"price": {"old": "12.00", "new": "11.00"}},
}


class ChangeOut(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [CHANGE_EXAMPLE]})

    id: int
    kind: ChangeKind
    key: str = Field(description="The item's item_key value, as text")
    item: dict[str, Any] = Field(description="The item now (as it was, for `removed`)")
    fields: dict[str, dict[str, Any]] | None = Field(
        default=None,
        description="For `changed`: each field whose value differs, `{old, new}`",
    )

    @classmethod
    def of(cls, change: RunChange) -> ChangeOut:
        return cls(
            id=change.id,
            kind=change.kind,
            key=change.key,
            item=change.item,
            fields=change.fields,
        )


class ChangeList(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "run_id": 17,
                    "item_key": "sku",
                    "changes": RUN_EXAMPLE["stats"]["changes"],
                    "data": [CHANGE_EXAMPLE],
                    "next_cursor": "5001",
                }
            ]
        }
    )

    run_id: int
    item_key: str | None = Field(description="The scraper's item_key now")
    changes: ChangeCounts | None = Field(
        description="The run's counts; null when the run was not compared (data is empty)"
    )
    data: list[ChangeOut]
    next_cursor: str | None
