"""Spans recorded in memory for in-process tests (across processes, see tests-e2e's OTLP
receiver). The SDK's provider is global and set once per process, so the first use installs
it and each test then sees only the spans that ended during it."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from servicekit.tracing.setup import install_tracer_provider


class RecordedSpans:
    def __init__(self, exporter: InMemorySpanExporter) -> None:
        self._exporter = exporter

    @property
    def finished(self) -> Sequence[ReadableSpan]:
        return self._exporter.get_finished_spans()

    def named(self, name: str) -> ReadableSpan:
        """The one finished span called `name` (fails listing the names there are)."""
        found = [span for span in self.finished if span.name == name]
        names = sorted({span.name for span in self.finished})
        assert len(found) == 1, f"{len(found)} spans named {name!r}; finished: {names}"
        return found[0]

    def clear(self) -> None:
        self._exporter.clear()


_exporter: InMemorySpanExporter | None = None


def _install() -> InMemorySpanExporter:
    global _exporter
    if _exporter is None:
        provider = install_tracer_provider(TracerProvider())
        _exporter = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(_exporter))
    return _exporter


@contextmanager
def recording_spans() -> Iterator[RecordedSpans]:
    exporter = _install()
    exporter.clear()
    yield RecordedSpans(exporter)
    exporter.clear()
