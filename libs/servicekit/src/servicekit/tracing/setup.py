"""The SDK, configured only by the standard `OTEL_*` variables.

With no `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), or with
`OTEL_SDK_DISABLED=true`, no SDK is installed at all: the API's no-op tracer answers every
call, no instrumentation wraps anything, and nothing is exported. A real provider with no
exporter would still create, sample and drop every span.

`build_tracer_provider` reads the variables that shape spans (`OTEL_SERVICE_NAME`,
`OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER(_ARG)`) from the mapping it is given; the
exporter's own (`OTEL_EXPORTER_OTLP_*` URL, headers, timeout) and `OTEL_BSP_*` are read by the
OTLP exporter and the batch processor from os.environ, the mapping `configure_tracing` passes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import unquote

from opentelemetry import metrics, trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    DEFAULT_OFF,
    DEFAULT_ON,
    ParentBased,
    ParentBasedTraceIdRatio,
    Sampler,
    TraceIdRatioBased,
)
from sqlalchemy.ext.asyncio import AsyncEngine

SUPPORTED_PROTOCOLS = frozenset({"http/protobuf"})
# Probes and scrapes every few seconds would bury the traces that matter.
EXCLUDED_URLS = "/healthz,/readyz,/metrics"
# OTEL_TRACES_SAMPLER's values in the specification that the SDK implements itself.
FIXED_SAMPLERS: dict[str, Sampler] = {
    "always_on": ALWAYS_ON,
    "always_off": ALWAYS_OFF,
    "parentbased_always_on": DEFAULT_ON,
    "parentbased_always_off": DEFAULT_OFF,
}
RATIO_SAMPLERS: dict[str, Callable[[float], Sampler]] = {
    "traceidratio": TraceIdRatioBased,
    "parentbased_traceidratio": ParentBasedTraceIdRatio,
}

_installed: TracerProvider | None = None
# Asked once per event on the hot paths; the API's own `get_tracer_provider()` reads
# os.environ on every call while no provider is set (about 1 µs). The API sets its provider
# once per process, so once True this never changes back.
_enabled = False
# Our spans start from the SDK's tracer once there is one: the API's proxy tracer wraps every
# span in a second context manager (about 3 µs a span, two spans per delivered event).
_proxy_tracer = trace.get_tracer("servicekit")
_sdk_tracer: trace.Tracer | None = None
# The installed sampler follows the parent's decision (the default, and `parentbased_*`).
_parent_based = False


class TracingConfigError(ValueError):
    """An `OTEL_*` variable asks for something this SDK set-up does not do."""


def tracing_requested(environ: Mapping[str, str]) -> bool:
    """Whether the environment asks for spans to be exported."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return bool(
        environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    )


def build_tracer_provider(
    environ: Mapping[str, str],
    service_name: str,
    *,
    exporter: SpanExporter | None = None,
) -> TracerProvider | None:
    """A provider exporting over OTLP/HTTP as the environment says, or None when it says
    nothing should be exported. `exporter` replaces the OTLP one (tests)."""
    if not tracing_requested(environ):
        return None
    protocol = (
        environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    )
    if protocol not in SUPPORTED_PROTOCOLS:
        raise TracingConfigError(
            f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r} is not supported; use http/protobuf"
        )
    # Resource.create's detector reads the same two variables from os.environ; what the
    # mapping says wins. The service's own name is the default that OTEL_SERVICE_NAME, or a
    # `service.name` among the attributes, overrides.
    attributes: dict[str, Any] = resource_attributes(environ.get("OTEL_RESOURCE_ATTRIBUTES", ""))
    attributes[SERVICE_NAME] = (
        environ.get("OTEL_SERVICE_NAME") or attributes.get(SERVICE_NAME) or service_name
    )
    provider = TracerProvider(resource=Resource.create(attributes), sampler=sampler(environ))
    if exporter is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter()
    # OTEL_BSP_* (queue, batch size, delay) are read by the processor.
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def resource_attributes(value: str) -> dict[str, str]:
    """`OTEL_RESOURCE_ATTRIBUTES`: `key=value` pairs separated by commas, values
    percent-encoded (the specification's format, as the SDK's own detector reads it)."""
    attributes: dict[str, str] = {}
    for item in value.split(","):
        key, separator, raw = item.partition("=")
        if not separator or not key.strip():
            if item.strip():
                raise TracingConfigError(f"OTEL_RESOURCE_ATTRIBUTES: {item!r} is not key=value")
            continue
        attributes[key.strip()] = unquote(raw.strip())
    return attributes


def sampler(environ: Mapping[str, str]) -> Sampler:
    """The sampler `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG` name. Unlike the SDK,
    which warns and samples everything, a value it cannot honour stops the process: a
    mistyped 10 % sampler would otherwise record every trace."""
    name = environ.get("OTEL_TRACES_SAMPLER", "").strip().lower() or "parentbased_always_on"
    if name in FIXED_SAMPLERS:
        return FIXED_SAMPLERS[name]
    if name not in RATIO_SAMPLERS:
        known = ", ".join([*FIXED_SAMPLERS, *RATIO_SAMPLERS])
        raise TracingConfigError(f"OTEL_TRACES_SAMPLER={name!r} is not supported; use {known}")
    argument = environ.get("OTEL_TRACES_SAMPLER_ARG", "").strip() or "1.0"
    try:
        ratio = float(argument)
    except ValueError:
        ratio = -1.0
    if not 0.0 <= ratio <= 1.0:
        raise TracingConfigError(
            f"OTEL_TRACES_SAMPLER_ARG={argument!r} is not a ratio between 0 and 1"
        )
    return RATIO_SAMPLERS[name](ratio)


def configure_tracing(service_name: str) -> bool:
    """Install the SDK for this process when the environment asks for it (once; later calls
    are no-ops); whether spans are being recorded."""
    global _installed
    if _installed is None:
        provider = build_tracer_provider(os.environ, service_name)
        if provider is None:
            return tracing_enabled()
        install_tracer_provider(provider)
        _installed = provider
        _instrument_http_clients()
    return True


def install_tracer_provider(provider: TracerProvider) -> TracerProvider:
    """Make `provider` the process's (the API allows one per process: when one is already
    installed, that one stays and is returned) and turn our spans on."""
    global _enabled, _sdk_tracer, _parent_based
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        provider = current
    else:
        trace.set_tracer_provider(provider)
    _sdk_tracer = provider.get_tracer("servicekit")
    _parent_based = isinstance(provider.sampler, ParentBased)
    _enabled = True
    return provider


def active_tracer() -> trace.Tracer:
    """The tracer our spans start from: the SDK's once installed, else the API's (no-op)."""
    return _sdk_tracer or _proxy_tracer


def children_follow_unsampled_parents() -> bool:
    """Whether a span whose parent was not sampled is never recorded (a parent-based
    sampler, the SDK's default): then a hot path may skip making it at all."""
    return _enabled and _parent_based


def tracing_enabled() -> bool:
    """An SDK provider was installed through `install_tracer_provider` (by
    `configure_tracing`, a test or a benchmark)."""
    return _enabled


def shutdown_tracing() -> None:
    """Flush what is queued (the SDK also does it at exit)."""
    provider = trace.get_tracer_provider()
    if isinstance(provider, TracerProvider):
        provider.force_flush(timeout_millis=5_000)


def _instrument_http_clients() -> None:
    from opentelemetry.instrumentation.aiohttp_client import AioHttpClientInstrumentor
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

    HTTPXClientInstrumentor().instrument()
    AioHttpClientInstrumentor().instrument()


def instrument_fastapi(app: Any) -> None:
    """Server spans for every request (named by the route template), when tracing is on."""
    if not tracing_enabled():
        return
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    # No span per ASGI receive/send message: three spans a request, two of them noise.
    FastAPIInstrumentor.instrument_app(
        app, excluded_urls=EXCLUDED_URLS, exclude_spans=["receive", "send"]
    )


def instrument_engine(engine: AsyncEngine) -> None:
    """A span per SQL statement on this engine, when tracing is on. The instrumentor's global
    `instrument()` takes one engine per process; tests and the stack open several."""
    if not tracing_enabled():
        return
    from opentelemetry.instrumentation.sqlalchemy.engine import EngineTracer

    tracer = trace.get_tracer("opentelemetry.instrumentation.sqlalchemy")
    usage = metrics.get_meter("opentelemetry.instrumentation.sqlalchemy").create_up_down_counter(
        "db.client.connections.usage", unit="connections"
    )
    EngineTracer(tracer, engine.sync_engine, usage)  # type: ignore[no-untyped-call]
