"""A small OTLP/HTTP trace receiver of our own: the services export to it as they would to a
collector, and tests read the spans back (decoded with opentelemetry-proto).

A thread of its own, not the tests' event loop: the stack's start and the tests' blocking CLI
calls would otherwise hold exports up until the exporters gave up.
"""

from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

SPAN_KIND = {1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


@dataclass(frozen=True)
class ReceivedSpan:
    service: str
    name: str
    kind: str
    trace_id: str
    span_id: str
    parent_span_id: str
    attributes: dict[str, Any]
    links: list[tuple[str, str]] = field(default_factory=list)


class OtlpReceiver:
    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != "/v1/traces":
                    self.send_response(404)
                    self.end_headers()
                    return
                receiver._add(ExportTraceServiceRequest.FromString(body))
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                return  # quiet: the exporters post every 200 ms

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _add(self, request: ExportTraceServiceRequest) -> None:
        found = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    found.append(
                        ReceivedSpan(
                            service=str(resource.get("service.name", "")),
                            name=span.name,
                            kind=SPAN_KIND.get(span.kind, "unspecified"),
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(),
                            attributes={a.key: _value(a.value) for a in span.attributes},
                            links=[
                                (link.trace_id.hex(), link.span_id.hex()) for link in span.links
                            ],
                        )
                    )
        with self._lock:
            self.spans.extend(found)

    def trace(self, trace_id: str) -> list[ReceivedSpan]:
        with self._lock:
            return [span for span in self.spans if span.trace_id == trace_id]
