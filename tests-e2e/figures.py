"""Figures the fault and replica flows measure, printed at the end of the run."""

from __future__ import annotations

from typing import Any

FIGURES: dict[str, dict[str, Any]] = {}


def record(flow: str, **values: Any) -> None:
    FIGURES[flow] = values
