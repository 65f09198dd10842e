"""Charts drawn on the server as inline SVG: no script to run (the CSP allows only our own
files), nothing to load, and the same picture in a screenshot as in the browser. The lines
take the text's colour (`currentColor`), so they read in light and dark; a second series is
dashed, so colour is never the only clue."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


def _scaled(
    values: Sequence[int], width: float, height: float, pad: float, top: int
) -> list[tuple[float, float]]:
    """The values as points across `width`, 0 at the bottom and `top` at the top."""
    step = (width - 2 * pad) / max(len(values) - 1, 1)
    return [
        (round(pad + i * step, 1), round(height - pad - v / top * (height - 2 * pad), 1))
        for i, v in enumerate(values)
    ]


def _points(points: Sequence[tuple[float, float]]) -> str:
    return " ".join(f"{x},{y}" for x, y in points)


@dataclass(frozen=True)
class Sparkline:
    points: str
    last: tuple[float, float]
    width: int
    height: int
    label: str


def sparkline(values: Sequence[int], *, width: int = 80, height: int = 24) -> Sparkline | None:
    """A line of `values` (oldest first), or None when there is nothing to draw."""
    if not values:
        return None
    drawn = list(values) if len(values) > 1 else [values[0], values[0]]
    points = _scaled(drawn, width, height, 2, max(max(drawn), 1))
    label = f"Items of the last {len(values)} runs, oldest first: " + ", ".join(map(str, values))
    return Sparkline(_points(points), points[-1], width, height, label)


@dataclass(frozen=True)
class Series:
    name: str
    points: str
    dashed: bool
    marks: list[tuple[float, float]]


@dataclass(frozen=True)
class RunChart:
    series: list[Series]
    top: int
    labels: list[tuple[float, str]]
    width: int
    height: int
    label: str


def run_chart(
    runs: Sequence[tuple[str, int, int]], *, width: int = 960, height: int = 240
) -> RunChart | None:
    """Pages and items per run; `runs` are (label, pages, items), oldest first."""
    if not runs:
        return None
    pages = [r[1] for r in runs]
    items = [r[2] for r in runs]
    top = max(max(pages), max(items), 1)
    pad = 24
    # Both series on one scale (the largest of either), so they compare at a glance.
    page_points = _scaled(pages, width, height, pad, top)
    item_points = _scaled(items, width, height, pad, top)
    marks = (list(page_points), list(item_points))
    if len(runs) == 1:  # one run: a level line across, rather than a lone dot
        page_points.append((width - pad, page_points[0][1]))
        item_points.append((width - pad, item_points[0][1]))
    every = max(1, len(runs) // 8)  # at most ~8 run labels under the axis
    step = (width - 2 * pad) / max(len(runs) - 1, 1)
    labels = [(round(pad + i * step, 1), r[0]) for i, r in enumerate(runs) if i % every == 0]
    last = f"the last {len(runs)} runs" if len(runs) > 1 else "the last run"
    label = (
        f"Pages (solid line, dots) and items (dashed line, rings) of {last}, oldest first; "
        "the run history table has the figures."
    )
    return RunChart(
        [
            Series("pages", _points(page_points), False, marks[0]),
            Series("items", _points(item_points), True, marks[1]),
        ],
        top,
        labels,
        width,
        height,
        label,
    )
