"""What servicekit.tracing costs on a hot path: the relay's publish span (the busiest one: a
span per event) and a plain span, with tracing off (no endpoint: no SDK at all), and on at
10 % and 100 % sampling (OTEL_TRACES_SAMPLER=parentbased_traceidratio).

Each mode runs in a process of its own (the SDK's provider is global, set once per process).
Spans that are sampled go to a discarding exporter behind the SDK's batch processor, as they
would go to OTLP: the network is the collector's cost, not the hot path's.

    uv run python libs/servicekit/bench/tracing_overhead.py [--spans 200000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence

MODES = {
    "off": {},
    "on, 10 % sampled": {
        "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
        "OTEL_TRACES_SAMPLER_ARG": "0.1",
    },
    "on, 100 % sampled": {"OTEL_TRACES_SAMPLER": "parentbased_always_on"},
}


def _measure(spans: int) -> dict[str, float]:
    """In the child: nanoseconds per operation for each hot path."""
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
    from servicekit.events.envelope import CloudEvent
    from servicekit.tracing import (
        build_tracer_provider,
        install_tracer_provider,
        publish_span,
        tracer,
    )

    class Discard(SpanExporter):
        def export(self, batch: Sequence[ReadableSpan]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        provider = build_tracer_provider(os.environ, "bench", exporter=Discard())
        assert provider is not None
        install_tracer_provider(provider)
    event = CloudEvent(source="bench", type="order.paid", data={"id": 1})

    def empty() -> None:
        return

    def publish() -> None:
        with publish_span(event):
            return

    def plain() -> None:
        with tracer.start_as_current_span("work"):
            return

    def per_call(body: Callable[[], None]) -> float:
        for _ in range(spans // 10):  # warm up
            body()
        started = time.perf_counter_ns()
        for _ in range(spans):
            body()
        return (time.perf_counter_ns() - started) / spans

    baseline = per_call(empty)
    return {
        "relay publish span": per_call(publish) - baseline,
        "plain span": per_call(plain) - baseline,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=200_000)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_measure(args.spans)))
        return
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    results: dict[str, dict[str, float]] = {}
    for mode, extra in MODES.items():
        env = dict(clean, **extra)
        if mode != "off":
            # Never contacted: the bench's exporter discards. Set, because it is what turns
            # tracing on.
            env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://127.0.0.1:9"
        output = subprocess.run(
            [sys.executable, __file__, "--child", "--spans", str(args.spans)],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        results[mode] = json.loads(output.strip().splitlines()[-1])
    print(f"servicekit.tracing overhead per operation ({args.spans:,} spans each, 1 core):")
    paths = list(next(iter(results.values())))
    print(f"  {'':22}" + "".join(f"{path:>22}" for path in paths))
    for mode, figures in results.items():
        print(f"  {mode:22}" + "".join(f"{figures[p] / 1000:>19.2f} µs" for p in paths))


if __name__ == "__main__":
    main()
