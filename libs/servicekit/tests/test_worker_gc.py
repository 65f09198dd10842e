from __future__ import annotations

import gc

from servicekit.cli import WORKER_GC_THRESHOLDS, collect_less_often


def test_a_worker_runs_the_young_generations_collection_after_20000_allocations() -> None:
    before = gc.get_threshold()
    try:
        collect_less_often()
        assert gc.get_threshold() == WORKER_GC_THRESHOLDS == (20_000, 10, 10)
    finally:
        gc.set_threshold(*before)
