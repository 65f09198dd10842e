"""Dispatch: every event on `EVENTS` becomes one delivery per matching active subscription.

Matching is a read: the deliveries of an event are handed to the engine at once and written
with the outcome of their first attempt, and the event is acknowledged only after that (or
after they are stored as pending), so its message stands for them until then. A delivery's
id comes from its subscription and event, so an event seen again (redelivered by JetStream,
or republished) is recognised and not sent twice.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import msgspec
import structlog
from servicekit.events import RawCloudEvent
from servicekit.loops import describe

from webhook_hub.delivery_engine.jobs import (
    DeliveryJob,
    FirstAttempt,
    delivery_id_within,
    namespace_of,
)
from webhook_hub.delivery_engine.ordering import (
    FALLBACK_KEY,
    KeyExpression,
    key_of,
    parse_ordering,
)
from webhook_hub.dispatch.expression_tally import TALLY
from webhook_hub.expressions import (
    CompiledExpression,
    EventScope,
    ExpressionError,
    ExpressionRefused,
    Kind,
    compile_expression,
    event_time_text,
    event_variable,
)
from webhook_hub.settings import Settings
from webhook_hub.wire_format import render_body, signing_secrets

logger = structlog.get_logger(__name__)
LOOP = "dispatch"
# Compiled ordering key expressions kept (a map cleared when full: subscriptions change rarely).
KEY_RULES_CACHED = 10_000


@dataclass(frozen=True)
class Matched:
    """What one read found for a batch of events: the active subscriptions to any of their
    types (rows of `delivery_engine.store.MATCHING`), the (subscription, event) pairs stored
    before, and which of the types are personal."""

    subscriptions: Sequence[tuple[Any, ...]]
    stored: frozenset[tuple[uuid.UUID, uuid.UUID]]
    personal: frozenset[str]

    @classmethod
    def of(cls, rows: Sequence[tuple[Any, ...]]) -> Matched:
        if not rows:
            return cls((), frozenset(), frozenset())
        # The last two columns are the same on every row (init plans).
        stored = frozenset((pair[0], pair[1]) for pair in rows[0][-1])
        return cls(rows, stored, frozenset(rows[0][-2]))


class _Candidate:
    """A matched subscription's row, read once per batch into plain attributes: a row's
    attribute costs 0.7 µs to read, and each delivery read a dozen."""

    __slots__ = (
        "approved",
        "endpoint_url",
        "events",
        "expressions",
        "headers",
        "id",
        "key_rule",
        "namespace",
        "ordering",
        "owner",
        "rate_limited",
        "retry_schedule",
        "secrets",
        "send_trace_context",
        "timeout_seconds",
        "wildcard",
    )

    def __init__(
        self, row: tuple[Any, ...], now: datetime, transition_seconds: int, timeout: int
    ) -> None:
        (
            self.id,
            self.owner,
            events,
            self.endpoint_url,
            secret,
            secret_old,
            rotated_at,
            self.headers,
            self.timeout_seconds,
            self.send_trace_context,
            self.approved,
            self.retry_schedule,
            timeout_in_effect,
            filter_source,
            transform_source,
            self.rate_limited,
            ordering,
            *_,
        ) = row
        # The subscription's, else its owner's default, else the service's (issue 32).
        self.timeout_seconds = timeout if timeout_in_effect is None else timeout_in_effect
        # None for most: one attribute test per delivery is all they cost.
        self.expressions = (
            (_compiled(filter_source, "filter"), _compiled(transform_source, "transform"))
            if filter_source or transform_source
            else None
        )
        # Ordered delivery: None (unordered) or the ordering read; `key_rule` is set by the
        # dispatcher (its compiled key expression, cached).
        self.ordering = parse_ordering(ordering)
        self.key_rule: KeyExpression | None = None
        self.namespace = namespace_of(self.id.bytes)
        self.events = frozenset(events)
        self.wildcard = "*" in self.events
        self.secrets = signing_secrets(secret, secret_old, rotated_at, now, transition_seconds)


class PerEvent(list[list[DeliveryJob]]):
    """The deliveries of a batch's events, in order; `failed`: the error of each event (by
    position) that raised instead."""

    def __init__(self, jobs: Iterable[list[DeliveryJob]] = ()) -> None:
        super().__init__(jobs)
        self.failed: dict[int, Exception] = {}


class Dispatcher:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        # Ordered subscriptions' key expressions, compiled once per (subscription, source).
        self._key_rules: dict[tuple[uuid.UUID, str], KeyExpression] = {}

    def _key_rule(self, sub: _Candidate) -> KeyExpression | None:
        source = sub.ordering.key if sub.ordering is not None else None
        if source is None:
            return None
        rule = self._key_rules.get((sub.id, source))
        if rule is None:
            if len(self._key_rules) >= KEY_RULES_CACHED:
                self._key_rules.clear()
            try:
                rule = compile_expression(source, field="ordering.key", kind="key")
            except Exception as exc:
                # Saved once compiled, it should compile: its events keep an order (the
                # fallback sequence, each with its log line) rather than none.
                rule = _Unusable(describe(exc))
            self._key_rules[(sub.id, source)] = rule
        return rule

    def deliveries_of(
        self,
        matched: Matched,
        events: Sequence[RawCloudEvent],
        sequences: Callable[[], Sequence[int]] | None = None,
    ) -> PerEvent:
        """For each event (in order), its deliveries not stored yet.

        Each item on its own: an event that raises has no deliveries and its error in
        `failed` (the caller sets it apart), and a subscription whose row cannot make a delivery job is left out with
        an error line naming it and the events it misses, so that neither holds up the rest
        of the batch."""
        if not matched.subscriptions:
            return PerEvent([] for _ in events)
        now = datetime.now(UTC)
        candidates = []
        ordered = False
        for row in matched.subscriptions:
            try:
                candidate = _Candidate(
                    row,
                    now,
                    self.settings.secret_transition_seconds,
                    self.settings.delivery_timeout_seconds,
                )
                if candidate.ordering is not None:
                    candidate.key_rule = self._key_rule(candidate)
                    ordered = True
                candidates.append(candidate)
            except Exception as exc:
                logger.error(
                    "subscription left out of dispatch: its row cannot make a delivery",
                    loop=LOOP,
                    subscription_id=str(row[0]),
                    event_ids=_wanted_by(row, events),
                    error=describe(exc),
                )
        stored, personal = matched.stored, matched.personal
        # The events' stream sequences (their publication order), read only for a batch that
        # matched an ordered subscription.
        seqs = sequences() if ordered and sequences is not None else None
        by_id = {sub.id: sub for sub in candidates if sub.ordering is not None}
        per_event = PerEvent()
        for position, event in enumerate(events):
            try:
                jobs = self._jobs_of(event, candidates, stored, personal)
                if ordered:
                    _order(jobs, by_id, event, seqs[position] if seqs else 0)
                per_event.append(jobs)
            except Exception as exc:
                per_event.failed[len(per_event)] = exc
                per_event.append([])
        return per_event

    @staticmethod
    def _jobs_of(
        event: RawCloudEvent,
        candidates: list[_Candidate],
        stored: frozenset[tuple[uuid.UUID, uuid.UUID]],
        personal: frozenset[str],
    ) -> list[DeliveryJob]:
        jobs: list[DeliveryJob] = []
        event_type, tenant, event_id = event.type, event.tenant, event.id
        # Personal data of others: approved owners only (an event for one tenant is that
        # owner's own).
        others_personal = tenant is None and event_type in personal
        # As the producer wrote it, rendered once per event, shared by its deliveries.
        payload_json = bytes(event.data)
        body = render_body(event_type, event.time, payload_json)
        event_id_bytes = event_id.bytes
        variable: EventScope | None = None
        # Why expressions cannot read this event's data (a number past a float's range, say):
        # its subscriptions with expressions count it as their error; the others still get it.
        unreadable: str | None = None
        for sub in candidates:
            if not sub.wildcard and event_type not in sub.events:
                continue
            if tenant is not None and sub.owner != tenant:
                continue
            if others_personal and not sub.approved:
                continue
            if stored and (sub.id, event_id) in stored:
                continue
            sent_payload, sent_body = payload_json, body
            if sub.expressions is not None:
                if variable is None and unreadable is None:
                    try:
                        variable = _variable_of(event, payload_json)
                    except Exception as exc:
                        unreadable = f"the event's data cannot be read: {describe(exc)}"
                if variable is None:
                    kind: Kind = "filter" if sub.expressions[0] is not None else "transform"
                    TALLY.failed(sub.id, kind, unreadable or "the event's data cannot be read")
                    continue
                shaped = _shaped(sub.id, sub.expressions, variable, event, payload_json, body)
                if shaped is None:
                    continue
                sent_payload, sent_body = shaped
            jobs.append(
                FirstAttempt(
                    delivery_id=delivery_id_within(sub.namespace, event_id_bytes),
                    subscription_id=sub.id,
                    event_type=event_type,
                    event_time=event.time,
                    payload_json=sent_payload,
                    attempts=0,
                    endpoint_url=sub.endpoint_url,
                    secrets=sub.secrets,
                    headers=sub.headers,
                    timeout_seconds=sub.timeout_seconds,
                    event_id=event_id,
                    owner=sub.owner,
                    body=sent_body,
                    traceparent=event.traceparent,
                    tracestate=event.tracestate,
                    send_trace_context=sub.send_trace_context,
                    retry_schedule=sub.retry_schedule,
                    rate_limited=sub.rate_limited,
                )
            )
        return jobs


# Compiled once per worker and source (not per event, nor per batch): bounded, cleared whole
# when full (a worker sees far fewer distinct expressions than this).
_COMPILED: dict[tuple[str, str], CompiledExpression | ExpressionError] = {}
_COMPILED_MAX = 10_000


def _compiled(source: str | None, kind: Kind) -> CompiledExpression | ExpressionError | None:
    """The program of a stored expression, or the error it now compiles to (stored before a
    change of the rules, say): its events are then counted as errors, not delivered."""
    if not source:
        return None
    key = (kind, source)
    found = _COMPILED.get(key)
    if found is None:
        if len(_COMPILED) >= _COMPILED_MAX:
            _COMPILED.clear()
        try:
            found = compile_expression(source, field=kind, kind=kind)
        except ExpressionError as exc:
            found = exc
        _COMPILED[key] = found
    return found


def _variable_of(event: RawCloudEvent, payload_json: bytes) -> EventScope:
    """The `event` expressions see, made once per event (for the first subscription that
    has an expression) and shared by the others."""
    return EventScope(
        event_variable(
            id=str(event.id),
            type=event.type,
            tenant=event.tenant,
            time=event_time_text(event.time),
            data=msgspec.json.decode(payload_json),
            source=event.source,
        ),
        size=len(payload_json),
    )


def _shaped(
    subscription_id: uuid.UUID,
    expressions: tuple[CompiledExpression | ExpressionError | None, ...],
    variable: EventScope,
    event: RawCloudEvent,
    payload_json: bytes,
    body: bytes,
) -> tuple[bytes, bytes] | None:
    """The payload and body to send to one subscription, or None when its filter leaves the
    event out or one of its expressions fails on it (counted in `TALLY`, not delivered: a
    transform that fails on an event fails again on a retry, and sending `data` untransformed
    could send what the transform was written to leave out)."""
    check, transform = expressions
    if check is not None:
        if isinstance(check, ExpressionError):
            TALLY.failed(subscription_id, "filter", str(check))
            return None
        try:
            if not check.matches(variable):
                TALLY.filtered(subscription_id)
                return None
        except ExpressionRefused as exc:
            TALLY.failed(subscription_id, "filter", exc.message)
            return None
    if transform is None:
        return payload_json, body
    if isinstance(transform, ExpressionError):
        TALLY.failed(subscription_id, "transform", str(transform))
        return None
    try:
        payload = transform.encode(variable)
    except ExpressionRefused as exc:
        TALLY.failed(subscription_id, "transform", exc.message)
        return None
    return payload, render_body(event.type, event.time, payload)


class _Unusable:
    """A saved key expression that no longer compiles: every event falls back."""

    def __init__(self, error: str) -> None:
        self.error = error

    def evaluate(self, event: object) -> object:
        raise ValueError(f"the key expression does not compile: {self.error}")


def _order(
    jobs: list[DeliveryJob], by_id: dict[uuid.UUID, _Candidate], event: RawCloudEvent, seq: int
) -> None:
    """Give the event's deliveries to ordered subscriptions their key and sequence (a batch
    without ordered subscriptions never comes here). A key that cannot be had puts the
    delivery in the fallback sequence, with one log line."""
    variable: dict[str, Any] | None = None
    for job in jobs:
        sub = by_id.get(job.subscription_id)
        if sub is None:
            continue
        if sub.key_rule is not None and variable is None:
            # What expressions see of the event, made once per event (its data parsed).
            variable = _event_variable(event)
        key, error = key_of(sub.key_rule, variable)
        if error is not None:
            logger.warning(
                "ordering key could not be had; the event goes in the fallback sequence",
                loop=LOOP,
                subscription_id=str(sub.id),
                event_id=str(event.id),
                order_key=FALLBACK_KEY,
                error=error,
            )
        job.order_key = key
        job.order_seq = seq


def _event_variable(event: RawCloudEvent) -> dict[str, Any]:
    return event_variable(
        id=str(event.id),
        type=event.type,
        tenant=event.tenant,
        time=event_time_text(event.time),
        data=json.loads(bytes(event.data)),
        source=event.source,
    )


def _wanted_by(row: tuple[Any, ...], events: Sequence[RawCloudEvent]) -> list[str]:
    """The ids of the events a subscription's row asks for (all, if the row cannot say)."""
    try:
        types, owner = frozenset(row[2]), row[1]
        return [
            str(event.id)
            for event in events
            if ("*" in types or event.type in types) and event.tenant in (None, owner)
        ]
    except Exception:
        return [str(event.id) for event in events]
