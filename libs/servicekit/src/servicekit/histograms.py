"""Prometheus histograms observed a batch at a time, for hot paths.

prometheus_client's `Histogram.observe` takes a lock and walks the buckets for every value:
2.1 µs per observation here, against 0.23 for a `bisect` into plain counters. A worker that
records a thousand attempts per batch observes them all in one call, under one lock, and the
registry reads the counters when it is scraped (`collect`, prometheus_client's public
collector interface). The exposition is a histogram's (`_bucket`, `_count`, `_sum`), without
the `_created` sample. As with prometheus_client, a histogram without labels is exposed (at
zero) from the start; a labelled series from its first batch, or from `touch`, so that a
rate over the first values counted after a restart sees them.
"""

from __future__ import annotations

import math
import threading
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.core import HistogramMetricFamily, Metric
from prometheus_client.registry import Collector


class _Series:
    __slots__ = ("counts", "total")

    def __init__(self, buckets: int) -> None:
        self.counts = [0] * buckets  # per bucket, not cumulative
        self.total = 0.0


class BatchHistogram(Collector):
    """A histogram with labels whose values are added in batches (`observe_many`)."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str] = (),
        *,
        buckets: Sequence[float],
        registry: CollectorRegistry | None = REGISTRY,
    ) -> None:
        bounds = sorted(float(bound) for bound in buckets)
        if not bounds or bounds[-1] != math.inf:
            bounds.append(math.inf)
        self.name = name
        self._documentation = documentation
        self._labelnames = tuple(labelnames)
        self._bounds = bounds
        self._series: dict[tuple[str, ...], _Series] = {}
        # Batches come from the event loop, scrapes from the probe server's thread.
        self._lock = threading.Lock()
        if not self._labelnames:
            self.touch()
        if registry is not None:
            registry.register(self)

    def touch(self, *labelvalues: str) -> None:
        """Expose the series of these label values (at zero until values come)."""
        self.observe_many((), *labelvalues)

    def observe_many(self, values: Iterable[float], *labelvalues: str) -> None:
        """Add `values` to the series of these label values (in `labelnames` order)."""
        if len(labelvalues) != len(self._labelnames):
            raise ValueError(f"{self.name} takes the labels {self._labelnames}")
        # Text, as `Histogram.labels` makes them: anything else would break the exposition.
        key = tuple(str(value) for value in labelvalues)
        bounds, index = self._bounds, bisect_left
        with self._lock:
            series = self._series.get(key)
            if series is None:
                series = self._series[key] = _Series(len(bounds))
            counts, total = series.counts, 0.0
            for value in values:
                counts[index(bounds, value)] += 1
                total += value
            series.total += total

    def _family(self) -> HistogramMetricFamily:
        return HistogramMetricFamily(self.name, self._documentation, labels=self._labelnames)

    def describe(self) -> Iterable[Metric]:
        # The registry learns the names this collector owns without collecting it.
        return [self._family()]

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        with self._lock:
            snapshot = [
                (labels, list(series.counts), series.total)
                for labels, series in self._series.items()
            ]
        for labels, counts, total in snapshot:
            cumulative, buckets = 0, []
            for bound, count in zip(self._bounds, counts, strict=True):
                cumulative += count
                buckets.append((_bound_text(bound), cumulative))
            family.add_metric(list(labels), buckets, sum_value=total)
        yield family


def _bound_text(bound: float) -> str:
    """A bucket's `le` as prometheus_client writes it ("0.005", "1.0", "+Inf")."""
    return "+Inf" if bound == math.inf else repr(bound)
