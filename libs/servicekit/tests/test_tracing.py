"""servicekit.tracing: set-up from OTEL_* only, trace context through outbox, relay and
consumers, the delivery-attempt API for webhook-hub, and trace ids in log lines."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import sys
import uuid
from typing import Any

import pytest
import structlog
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from opentelemetry.context import Context
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    DEFAULT_ON,
    Decision,
    ParentBasedTraceIdRatio,
    TraceIdRatioBased,
)
from opentelemetry.trace import (
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    TraceFlags,
    set_span_in_context,
)
from servicekit.events import CloudEvent, record_event
from servicekit.settings import ServiceSettings
from servicekit.testing.receiver import HttpReceiver
from servicekit.testing.tracing import RecordedSpans
from servicekit.tracing import (
    TRACEPARENT,
    attempt_span,
    build_tracer_provider,
    consume_span,
    current_trace_headers,
    dispatch_span,
    inject_traceparent,
    sampled,
    tracer,
)
from servicekit.tracing.setup import TracingConfigError
from servicekit.web.logging import configure_logging
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlmodel.ext.asyncio.session import AsyncSession

from tests.factories import Consuming, messages_on, relay_for, unique_event_type
from tests.test_consumer import Recorder, drain

ENDPOINT = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}


def trace_id_of(traceparent: str) -> str:
    return traceparent.split("-")[1]


def hex_trace_id(value: int) -> str:
    return format(value, "032x")


# --- set-up from the environment -------------------------------------------------------


def test_no_endpoint_installs_no_sdk() -> None:
    assert build_tracer_provider({}, "kit") is None


def test_sdk_disabled_installs_no_sdk_even_with_an_endpoint() -> None:
    assert build_tracer_provider({**ENDPOINT, "OTEL_SDK_DISABLED": "true"}, "kit") is None


def test_service_name_defaults_to_the_services_own() -> None:
    provider = build_tracer_provider(ENDPOINT, "commerce-content", exporter=InMemorySpanExporter())
    assert provider is not None
    assert provider.resource.attributes["service.name"] == "commerce-content"


def test_otel_service_name_overrides_the_default() -> None:
    environ = {**ENDPOINT, "OTEL_SERVICE_NAME": "shop-eu"}
    provider = build_tracer_provider(environ, "commerce-content", exporter=InMemorySpanExporter())
    assert provider is not None
    assert provider.resource.attributes["service.name"] == "shop-eu"


def provider_for(environ: dict[str, str]) -> TracerProvider:
    provider = build_tracer_provider(
        {**ENDPOINT, **environ}, "commerce-content", exporter=InMemorySpanExporter()
    )
    assert provider is not None
    return provider


def test_a_traceidratio_sampler_samples_the_ratio_of_otel_traces_sampler_arg() -> None:
    provider = provider_for(
        {"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25"}
    )

    assert isinstance(provider.sampler, TraceIdRatioBased)
    assert provider.sampler.rate == 0.25


def test_a_parentbased_traceidratio_sampler_follows_parents_and_samples_roots_by_ratio() -> None:
    provider = provider_for(
        {"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.1"}
    )
    # The ratio sampler keeps a trace whose id's low 64 bits fall below rate * 2**64.
    kept, dropped = 1, 2**64 - 1
    parent = set_span_in_context(
        NonRecordingSpan(SpanContext(dropped, 1, is_remote=True, trace_flags=TraceFlags(1)))
    )

    def decision(trace_id: int, context: Context | None = None) -> Decision:
        return provider.sampler.should_sample(context, trace_id, "span").decision

    assert isinstance(provider.sampler, ParentBasedTraceIdRatio)
    assert decision(kept) == Decision.RECORD_AND_SAMPLE
    assert decision(dropped) == Decision.DROP
    assert decision(dropped, parent) == Decision.RECORD_AND_SAMPLE


def test_an_always_off_sampler_records_no_span() -> None:
    provider = provider_for({"OTEL_TRACES_SAMPLER": "always_off"})

    span = provider.get_tracer("test").start_span("dropped")

    assert provider.sampler is ALWAYS_OFF
    assert not span.is_recording()


def test_without_otel_traces_sampler_spans_follow_their_parents_decision() -> None:
    provider = provider_for({})

    assert provider.sampler is DEFAULT_ON
    assert provider.get_tracer("test").start_span("recorded").is_recording()


@pytest.mark.parametrize(
    ("environ", "refused"),
    [
        ({"OTEL_TRACES_SAMPLER": "traceidratoi"}, "OTEL_TRACES_SAMPLER='traceidratoi'"),
        (
            {"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "10%"},
            "OTEL_TRACES_SAMPLER_ARG='10%'",
        ),
        (
            {"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "1.5"},
            "OTEL_TRACES_SAMPLER_ARG='1.5'",
        ),
    ],
)
def test_a_sampler_the_sdk_cannot_honour_is_refused(environ: dict[str, str], refused: str) -> None:
    with pytest.raises(TracingConfigError, match=re.escape(refused)):
        provider_for(environ)


def test_otel_resource_attributes_appear_on_the_providers_resource() -> None:
    provider = provider_for(
        {"OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=staging, service.instance.id=pod%201"}
    )

    attributes = provider.resource.attributes
    assert attributes["deployment.environment"] == "staging"
    assert attributes["service.instance.id"] == "pod 1"
    assert attributes["service.name"] == "commerce-content"


def test_a_service_name_in_otel_resource_attributes_gives_way_to_otel_service_name() -> None:
    named_by_attributes = provider_for({"OTEL_RESOURCE_ATTRIBUTES": "service.name=shop-us"})
    named_by_both = provider_for(
        {"OTEL_RESOURCE_ATTRIBUTES": "service.name=shop-us", "OTEL_SERVICE_NAME": "shop-eu"}
    )

    assert named_by_attributes.resource.attributes["service.name"] == "shop-us"
    assert named_by_both.resource.attributes["service.name"] == "shop-eu"


def test_otel_resource_attributes_with_an_item_that_is_not_key_value_are_refused() -> None:
    with pytest.raises(TracingConfigError, match="'staging' is not key=value"):
        provider_for({"OTEL_RESOURCE_ATTRIBUTES": "team=shop,staging"})


def test_a_protocol_other_than_http_protobuf_is_refused() -> None:
    with pytest.raises(TracingConfigError, match="grpc"):
        build_tracer_provider({**ENDPOINT, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "kit")


# A process of its own: the SDK's provider is global, once per process.
_EXPORT_ONE_SPAN = """
from servicekit.tracing import configure_tracing, shutdown_tracing, tracer
print(configure_tracing("kit-probe"))
with tracer.start_as_current_span("probe"):
    pass
shutdown_tracing()
"""


async def spans_exported_by_a_process(receiver: HttpReceiver, **environ: str) -> int:
    env = (
        {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        | {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_BSP_SCHEDULE_DELAY": "50"}
        | environ
    )
    # Not subprocess.run: the receiver answers on this event loop.
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _EXPORT_ONE_SPAN, env=env, stdout=asyncio.subprocess.DEVNULL
    )
    assert await asyncio.wait_for(process.wait(), 60) == 0
    return len([r for r in receiver.requests if r.path == "/v1/traces"])


async def test_an_endpoint_exports_spans_over_otlp_http(http_receiver: HttpReceiver) -> None:
    assert await spans_exported_by_a_process(http_receiver) == 1
    request = http_receiver.requests[0]
    assert request.headers["content-type"] == "application/x-protobuf"


async def test_otel_sdk_disabled_exports_nothing(http_receiver: HttpReceiver) -> None:
    assert await spans_exported_by_a_process(http_receiver, OTEL_SDK_DISABLED="true") == 0


# What the services' HTTP clients do, in a process of its own: `configure_tracing` installs the
# httpx and aiohttp instrumentations once per process, with the SDK.
_CLIENT_REQUESTS = """
import asyncio
import sys

import aiohttp
import httpx
from servicekit.net import AddressPolicy, guarded_connector
from servicekit.tracing import configure_tracing, shutdown_tracing


async def main(url: str) -> None:
    async with httpx.AsyncClient() as client:
        await client.get(f"{url}/by-httpx?page=2")
    # The connector webhook deliveries and crawls go through.
    connector = guarded_connector(AddressPolicy.allowing(["127.0.0.0/8"]))
    async with aiohttp.ClientSession(connector=connector) as session:
        async with session.post(f"{url}/by-aiohttp", data=b"{}") as response:
            await response.read()


assert configure_tracing("kit-probe")
asyncio.run(main(sys.argv[1]))
shutdown_tracing()
"""


def exported_spans(receiver: HttpReceiver) -> list[ProtoSpan]:
    return [
        span
        for request in receiver.requests
        if request.path == "/v1/traces"
        for resource_spans in ExportTraceServiceRequest.FromString(request.body).resource_spans
        for scope_spans in resource_spans.scope_spans
        for span in scope_spans.spans
    ]


def attribute_values(span: ProtoSpan) -> dict[str, Any]:
    return {
        attribute.key: getattr(attribute.value, attribute.value.WhichOneof("value") or "")
        for attribute in span.attributes
    }


async def test_httpx_and_aiohttp_requests_are_client_spans_that_send_their_traceparent(
    http_receiver: HttpReceiver,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")} | {
        "OTEL_EXPORTER_OTLP_ENDPOINT": http_receiver.url,
        "OTEL_BSP_SCHEDULE_DELAY": "50",
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _CLIENT_REQUESTS, http_receiver.url, env=env
    )
    assert await asyncio.wait_for(process.wait(), 60) == 0

    spans = {span.name: span for span in exported_spans(http_receiver)}
    sent = {request.path: request for request in http_receiver.requests}

    assert sorted(spans) == ["GET", "POST"]
    for span in spans.values():
        assert span.kind == ProtoSpan.SpanKind.SPAN_KIND_CLIENT
    # The instrumentations' attribute names (HTTP semantic conventions before 1.21).
    assert attribute_values(spans["GET"]) == {
        "http.method": "GET",
        "http.url": f"{http_receiver.url}/by-httpx?page=2",
        "http.status_code": 200,
    }
    assert attribute_values(spans["POST"]) == {
        "http.method": "POST",
        "http.url": f"{http_receiver.url}/by-aiohttp",
        "http.status_code": 200,
    }
    for path, name in (("/by-httpx?page=2", "GET"), ("/by-aiohttp", "POST")):
        version, trace_id, span_id, flags = sent[path].headers[TRACEPARENT].split("-")
        assert version == "00"
        assert (trace_id, span_id) == (spans[name].trace_id.hex(), spans[name].span_id.hex())
        assert int(flags, 16) & 1  # sampled


# A fresh process: whether tracing is on is decided once per process.
_ENABLED_WITHOUT_THEN_WITH_A_PROVIDER = """
import json
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace import Tracer
from servicekit.tracing import (
    active_tracer,
    children_follow_unsampled_parents,
    configure_tracing,
    install_tracer_provider,
    tracing_enabled,
)
before = [configure_tracing("kit-probe"), tracing_enabled(), children_follow_unsampled_parents()]
first = install_tracer_provider(TracerProvider())
second = install_tracer_provider(TracerProvider())
after = [tracing_enabled(), second is first, isinstance(active_tracer(), Tracer)]
print(json.dumps(before + after + [children_follow_unsampled_parents()]))
"""


async def test_tracing_is_off_until_a_provider_is_installed_and_the_first_one_stays() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _ENABLED_WITHOUT_THEN_WITH_A_PROVIDER,
        env=env,
        stdout=asyncio.subprocess.PIPE,
    )
    output, _ = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0
    configured, enabled, parent_based, *after = json.loads(output)
    assert (configured, enabled, parent_based) == (False, False, False)
    enabled, kept_first, sdk_tracer, parent_based = after
    assert (enabled, kept_first, sdk_tracer, parent_based) == (True, True, True, True)


@pytest.mark.parametrize(
    ("traceparent", "expected"),
    [
        ("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", True),
        ("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00", False),
        ("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-03", True),
        (None, None),
        ("", None),
        ("00-short-00", None),
        ("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-zz", None),
        ("01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00-later", False),
    ],
)
def test_the_sampled_flag_is_read_from_a_traceparent(
    traceparent: str | None, expected: bool | None
) -> None:
    assert sampled(traceparent) is expected


# --- trace context through the outbox, the relay and NATS ------------------------------


class Relayed:
    """Records an event (inside a request-like span, or outside any) and relays it."""

    def __init__(
        self, session: AsyncSession, engine: AsyncEngine, js: JetStreamContext, settings: Any
    ) -> None:
        self.session, self.engine, self.js, self.settings = session, engine, js, settings

    async def __call__(self, event_type: str, *, in_span: bool = True) -> tuple[Msg, Span | None]:
        request_span = None
        with contextlib.ExitStack() as stack:
            if in_span:
                request_span = stack.enter_context(
                    tracer.start_as_current_span("payment notification")
                )
            async with self.session.begin():
                await record_event(self.session, event_type, {"id": 1})
        await relay_for(self.engine, self.js, self.settings).publish_pending()
        [message] = await messages_on(self.js, f"events.{event_type}")
        return message, request_span


@pytest.fixture
def relayed(
    committing_session: AsyncSession,
    db_engine: AsyncEngine,
    js: JetStreamContext,
    kit_settings: ServiceSettings,
) -> Relayed:
    return Relayed(committing_session, db_engine, js, kit_settings)


async def test_the_envelope_carries_the_outbox_record_spans_traceparent(
    spans: RecordedSpans, relayed: Relayed
) -> None:
    event_type = unique_event_type("order")
    message, request_span = await relayed(event_type)
    assert request_span is not None
    body = json.loads(message.data)
    record = spans.named(f"outbox record {event_type}")
    trace_id = hex_trace_id(request_span.get_span_context().trace_id)
    assert trace_id_of(body[TRACEPARENT]) == trace_id
    assert body[TRACEPARENT].split("-")[2] == format(record.context.span_id, "016x")
    assert record.kind is SpanKind.PRODUCER


async def test_the_relay_publishes_in_the_producers_trace_with_nats_headers(
    spans: RecordedSpans, relayed: Relayed
) -> None:
    event_type = unique_event_type("order")
    message, _ = await relayed(event_type)
    record = spans.named(f"outbox record {event_type}")
    publish_span = spans.named(f"publish events.{event_type}")
    assert publish_span.parent is not None
    assert publish_span.parent.span_id == record.context.span_id
    assert publish_span.context.trace_id == record.context.trace_id
    assert message.headers is not None
    assert message.headers[TRACEPARENT].split("-")[2] == format(
        publish_span.context.span_id, "016x"
    )


async def test_an_event_recorded_outside_any_span_still_gets_a_trace_of_its_own(
    spans: RecordedSpans, relayed: Relayed
) -> None:
    event_type = unique_event_type("run")
    message, _ = await relayed(event_type, in_span=False)
    record = spans.named(f"outbox record {event_type}")
    assert record.parent is None
    assert trace_id_of(json.loads(message.data)[TRACEPARENT]) == hex_trace_id(
        record.context.trace_id
    )


# --- consumers -------------------------------------------------------------------------


async def test_a_consumer_continues_the_producers_trace(
    spans: RecordedSpans, consuming: Consuming
) -> None:
    consumer = await consuming.subscribed(Recorder())
    with tracer.start_as_current_span("producer") as producer:
        event = CloudEvent(
            source="test", type=consuming.event_type, data={}, **current_trace_headers()
        )
    await consuming.publish(event)
    await drain(consumer, rounds=2)

    consumed = spans.named(f"process {consumer.durable}")
    assert consumed.context.trace_id == producer.get_span_context().trace_id
    assert consumed.parent is not None
    assert consumed.parent.span_id == producer.get_span_context().span_id


async def test_a_consumer_given_an_event_without_traceparent_starts_a_new_trace(
    spans: RecordedSpans, consuming: Consuming
) -> None:
    consumer = await consuming.subscribed(Recorder())
    await consuming.publish(consuming.event())
    # Whatever is current in the consuming task is not the event's parent.
    with tracer.start_as_current_span("unrelated") as unrelated:
        await drain(consumer, rounds=2)

    consumed = spans.named(f"process {consumer.durable}")
    assert consumed.parent is None
    assert consumed.context.trace_id != unrelated.get_span_context().trace_id


def test_a_batch_of_several_events_links_to_each_producer(spans: RecordedSpans) -> None:
    producers = []
    events = []
    for _ in range(3):
        with tracer.start_as_current_span("producer") as producer:
            producers.append(producer.get_span_context())
            events.append(CloudEvent(source="t", type="a.b", data={}, **current_trace_headers()))
    with consume_span("batcher", events):
        pass

    consumed = spans.named("process batcher")
    assert consumed.parent is None
    assert [link.context.span_id for link in consumed.links] == [p.span_id for p in producers]


# --- webhook-hub's dispatch and attempts -----------------------------------------------


def test_dispatch_and_first_attempt_continue_the_event_trace_and_reach_the_receiver(
    spans: RecordedSpans,
) -> None:
    with tracer.start_as_current_span("producer") as producer:
        event = CloudEvent(source="t", type="order.paid", data={}, **current_trace_headers())
    outgoing: dict[str, str] = {}
    with (
        dispatch_span(event),
        attempt_span(
            subscription_id="sub-1", event_type=event.type, webhook_id="msg_1", attempt=1
        ) as attempt,
    ):
        inject_traceparent(outgoing)
        attempt.finish(status_code=200, outcome="succeeded")

    dispatch = spans.named("dispatch order.paid")
    delivered = spans.named("deliver order.paid")
    trace_id = producer.get_span_context().trace_id
    assert dispatch.context.trace_id == delivered.context.trace_id == trace_id
    assert delivered.parent is not None
    assert delivered.parent.span_id == dispatch.context.span_id
    assert trace_id_of(outgoing[TRACEPARENT]) == hex_trace_id(trace_id)
    assert delivered.attributes is not None
    assert dict(delivered.attributes) == {
        "webhook.subscription_id": "sub-1",
        "cloudevents.event_type": "order.paid",
        "webhook.id": "msg_1",
        "webhook.attempt": 1,
        "webhook.outcome": "succeeded",
        "http.response.status_code": 200,
    }


def test_a_retry_links_to_the_original_trace_instead_of_being_its_child(
    spans: RecordedSpans,
) -> None:
    with tracer.start_as_current_span("first attempt") as first:
        origin = current_trace_headers()
    with (
        tracer.start_as_current_span("retry loop"),
        attempt_span(
            subscription_id="sub-1",
            event_type="order.paid",
            webhook_id="msg_1",
            attempt=2,
            origin=origin,
        ) as attempt,
    ):
        attempt.finish(status_code=503, outcome="failed")

    retry = spans.named("deliver order.paid (retry)")
    assert retry.parent is None
    assert retry.context.trace_id != first.get_span_context().trace_id
    assert [link.context.span_id for link in retry.links] == [first.get_span_context().span_id]
    assert retry.attributes is not None
    assert retry.attributes["http.response.status_code"] == 503
    assert not retry.status.is_ok


def test_an_attempt_carries_its_own_span_as_traceparent(spans: RecordedSpans) -> None:
    with attempt_span(subscription_id="s", event_type="a.b", webhook_id="w", attempt=1) as attempt:
        headers = attempt.trace_headers
    delivered = spans.named("deliver a.b")
    assert headers[TRACEPARENT].split("-")[2] == format(delivered.context.span_id, "016x")


# --- logs ------------------------------------------------------------------------------


def test_log_lines_inside_a_span_carry_trace_and_span_ids(
    spans: RecordedSpans, capsys: pytest.CaptureFixture[str]
) -> None:
    configure_logging("INFO", json=True)
    with tracer.start_as_current_span("work") as span:
        structlog.get_logger("probe").info("did work", job=str(uuid.uuid4()))
    line = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert line["trace_id"] == hex_trace_id(span.get_span_context().trace_id)
    assert line["span_id"] == format(span.get_span_context().span_id, "016x")


def test_log_lines_outside_a_span_carry_no_trace_ids(
    spans: RecordedSpans, capsys: pytest.CaptureFixture[str]
) -> None:
    configure_logging("INFO", json=True)
    structlog.get_logger("probe").info("idle")
    line = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert "trace_id" not in line
    assert "span_id" not in line
