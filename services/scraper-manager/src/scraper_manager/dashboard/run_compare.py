"""Two runs of a scraper side by side (issue 35, what ScrapydWeb's and Crawlab's run
comparisons show): their figures, their answers by status code and their changes, each with
the difference from the first to the second. Pure: runs in, rows out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scraper_manager.dashboard.live import status_breakdown
from scraper_manager.models import Run, RunStatus


@dataclass(frozen=True)
class ComparedFigure:
    label: str
    first: float | int | None
    second: float | int | None

    @property
    def change(self) -> float | int | None:
        if self.first is None or self.second is None:
            return None
        return round(self.second - self.first, 1)


@dataclass(frozen=True)
class ComparedStatus:
    code: str
    kind: str
    first: int
    second: int

    @property
    def change(self) -> int:
        return self.second - self.first


@dataclass(frozen=True)
class RunChanges:
    """A run's comparison with the run before it, as the worker recorded it."""

    compared_run_id: int | None
    added: int
    changed: int
    removed: int


@dataclass(frozen=True)
class RunComparison:
    figures: list[ComparedFigure]
    statuses: list[ComparedStatus]
    changes: tuple[RunChanges | None, RunChanges | None]


def _seconds(run: Run) -> float | None:
    if run.started_at is None or run.finished_at is None:
        return None
    return round((run.finished_at - run.started_at).total_seconds(), 1)


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def run_changes(stored: Mapping[str, object] | None) -> RunChanges | None:
    """The `changes` column read totally: None when the run was not compared."""
    if not isinstance(stored, Mapping):
        return None
    compared = stored.get("compared_run_id")
    return RunChanges(
        compared if isinstance(compared, int) and not isinstance(compared, bool) else None,
        _count(stored.get("added")),
        _count(stored.get("changed")),
        _count(stored.get("removed")),
    )


def compare_runs(first: Run, second: Run) -> RunComparison:
    figures = [
        ComparedFigure("Pages fetched", first.pages_fetched, second.pages_fetched),
        ComparedFigure("Items collected", first.items_collected, second.items_collected),
        ComparedFigure("Failed requests", first.requests_failed, second.requests_failed),
        ComparedFigure("Retries", first.retries, second.retries),
        ComparedFigure("Pages not modified (304)", first.not_modified, second.not_modified),
        ComparedFigure("Bytes received", first.bytes_received, second.bytes_received),
        ComparedFigure("Duration (s)", _seconds(first), _seconds(second)),
    ]
    shares = {
        "first": {s.code: s for s in status_breakdown(first.status_counts or {})},
        "second": {s.code: s for s in status_breakdown(second.status_counts or {})},
    }
    codes = sorted(
        {*shares["first"], *shares["second"]}, key=lambda code: (not code.isdigit(), code)
    )
    statuses = []
    for code in codes:
        a, b = shares["first"].get(code), shares["second"].get(code)
        shown = a or b
        kind = shown.kind if shown is not None else ""
        statuses.append(ComparedStatus(code, kind, a.answers if a else 0, b.answers if b else 0))
    return RunComparison(
        figures, statuses, (run_changes(first.changes), run_changes(second.changes))
    )


def default_pair(runs: Sequence[Run]) -> tuple[int, int] | None:
    """The runs compared when none are named: the last two that crawled (newest second)."""
    crawled = [r for r in runs if r.status not in (RunStatus.SKIPPED, RunStatus.PENDING)]
    if len(crawled) < 2:
        return None
    return crawled[1].id, crawled[0].id
