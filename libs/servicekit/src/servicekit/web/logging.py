"""Structured logs: JSON lines in production, readable lines on a terminal."""

from __future__ import annotations

import logging
import sys

import structlog
from opentelemetry import trace
from structlog.typing import EventDict, WrappedLogger


def add_trace_ids(_: WrappedLogger, __: str, event_dict: EventDict) -> EventDict:
    """`trace_id` and `span_id` of the current span, as log backends and trace UIs spell them
    (32 and 16 lower-case hex digits), so a log line leads to its trace and back."""
    context = trace.get_current_span().get_span_context()
    if context.is_valid:
        event_dict.setdefault("trace_id", format(context.trace_id, "032x"))
        event_dict.setdefault("span_id", format(context.span_id, "016x"))
    return event_dict


def _stderr_logger(*_: object) -> structlog.PrintLogger:
    # Whatever sys.stderr is when the line is written, not when logging was configured: a
    # stream swapped since (a test's capture, now closed) would turn a log line into a 500.
    return structlog.PrintLogger(sys.stderr)


def configure_logging(level: str = "INFO", *, json: bool = True) -> None:
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        numeric = logging.INFO
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            add_trace_ids,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=_stderr_logger,
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(
        level=numeric, stream=sys.stderr, format="%(levelname)s %(name)s %(message)s"
    )
