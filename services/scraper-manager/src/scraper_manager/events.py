"""The event types scraper-manager emits (with the client as `tenant`), registered with
webhook-hub at startup."""

from datetime import datetime

from pydantic import BaseModel
from servicekit.events import EventTypeRegistry

registry = EventTypeRegistry("scraper-manager")

RUN_STARTED = "run.started"
RUN_COMPLETED = "run.completed"
RUN_FAILED = "run.failed"
RUN_STOPPED = "run.stopped"
ITEMS_COLLECTED = "items.collected"
RUN_EVENT_TYPES = (RUN_STARTED, RUN_COMPLETED, RUN_FAILED, RUN_STOPPED, ITEMS_COLLECTED)


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
}
registry.declare(
    RUN_STARTED,
    RunEvent,
    description="A run started.",
    example={**_RUN, "status": "running", "finished_at": None},
)
registry.declare(RUN_COMPLETED, RunEvent, description="A run finished.", example=_RUN)
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
