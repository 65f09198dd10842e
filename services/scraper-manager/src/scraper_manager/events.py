"""The event types scraper-manager emits (with the client as `tenant`), registered with
webhook-hub at startup."""

from datetime import datetime
from typing import Any

from pydantic import BaseModel
from servicekit.events import EventTypeRegistry

registry = EventTypeRegistry("scraper-manager")

RUN_STARTED = "run.started"
RUN_COMPLETED = "run.completed"
RUN_FAILED = "run.failed"
RUN_STOPPED = "run.stopped"
ITEMS_COLLECTED = "items.collected"
RUN_ITEMS_CHANGED = "run.items_changed"
RUN_EVENT_TYPES = (
    RUN_STARTED,
    RUN_COMPLETED,
    RUN_FAILED,
    RUN_STOPPED,
    ITEMS_COLLECTED,
    RUN_ITEMS_CHANGED,
)
# Changes carried by `run.items_changed`; the rest are read from the API.
EVENT_CHANGES = 100


class ChangeCounts(BaseModel):
    compared_run_id: int | None
    added: int
    removed: int
    changed: int
    duplicates: int
    unkeyed: int


class RunEvent(BaseModel):
    scraper_id: int
    run_id: int
    status: str
    items_collected: int
    pages_fetched: int
    requests_failed: int
    started_at: datetime | None
    finished_at: datetime | None
    error: str | None = None
    not_modified: int = 0
    # The comparison with the previous successful run (scrapers with an `item_key`).
    changes: ChangeCounts | None = None


class ItemChange(BaseModel):
    kind: str
    key: str
    item: dict[str, Any]
    fields: dict[str, Any] | None = None


class ItemsChanged(BaseModel):
    scraper_id: int
    run_id: int
    compared_run_id: int
    added: int
    removed: int
    changed: int
    # The first EVENT_CHANGES changes in key order; `more`: the API has the rest.
    changes: list[ItemChange]
    more: bool


class ItemsCollected(BaseModel):
    scraper_id: int
    run_id: int
    count: int
    items_collected: int


_RUN = {
    "scraper_id": 4,
    "run_id": 17,
    "status": "completed",
    "items_collected": 120,
    "pages_fetched": 40,
    "requests_failed": 1,
    "started_at": "2026-11-22T10:00:00Z",
    "finished_at": "2026-11-22T10:01:30Z",
    "error": None,
    "not_modified": 0,
    "changes": None,
}
registry.declare(
    RUN_STARTED,
    RunEvent,
    description="A run started.",
    example={**_RUN, "status": "running", "finished_at": None},
)
registry.declare(
    RUN_COMPLETED,
    RunEvent,
    description="A run finished (with `changes` when its scraper has an item_key).",
    example={
        **_RUN,
        "changes": {
            "compared_run_id": 16,
            "added": 1,
            "removed": 0,
            "changed": 1,
            "duplicates": 0,
            "unkeyed": 0,
        },
    },
)
registry.declare(
    RUN_FAILED,
    RunEvent,
    description="A run failed.",
    example={**_RUN, "status": "failed", "error": "worker lost"},
)
registry.declare(
    RUN_STOPPED, RunEvent, description="A run was stopped.", example={**_RUN, "status": "stopped"}
)
registry.declare(
    ITEMS_COLLECTED,
    ItemsCollected,
    description="A batch of new items was collected by a run.",
    example={"scraper_id": 4, "run_id": 17, "count": 100, "items_collected": 100},
)
registry.declare(
    RUN_ITEMS_CHANGED,
    ItemsChanged,
    description=(
        "A successful run's items differ from the previous successful run's (by the "
        "scraper's item_key): counts and the first 100 changes."
    ),
    example={
        "scraper_id": 4,
        "run_id": 17,
        "compared_run_id": 16,
        "added": 1,
        "removed": 0,
        "changed": 1,
        "changes": [
            {"kind": "added", "key": "sku-9", "item": {"sku": "sku-9", "price": "5.00"}},
            {
                "kind": "changed",
                "key": "sku-1",
                "item": {"sku": "sku-1", "price": "11.00"},
                "fields": {"price": {"old": "12.00", "new": "11.00"}},
            },
        ],
        "more": False,
    },
)
