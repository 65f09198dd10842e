"""What the engine works on: one delivery to send, the event message it came from, and what
one attempt of it ended in (its `Outcome`, worked out once where the attempt ends, and its
`NextStep`, decided once where it is recorded: both carried, never worked out again)."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, ClassVar, NamedTuple

from nats.aio.msg import Msg

from webhook_hub.delivery_engine.policy import RETRY_AFTER_STATUSES
from webhook_hub.models import DeliveryStatus
from webhook_hub.wire_format import render_body

if TYPE_CHECKING:
    from _hashlib import HASH


def delivery_id_for(subscription_id: uuid.UUID, event_id: uuid.UUID) -> uuid.UUID:
    """The same id (and so the same `webhook-id`) whichever worker sends the event, and
    however often: a redelivered event is recognised as the delivery it already is."""
    # UUIDv5 (SHA-1 of namespace and name) with the event id's 16 bytes as the name: what
    # `uuid.uuid5` does, without first turning the name into text; the version and variant
    # bits set here rather than by `UUID(version=5)` (2.1 µs a call, now 1.6).
    return delivery_id_within(namespace_of(subscription_id.bytes), event_id.bytes)


def namespace_of(subscription_id: bytes) -> HASH:
    """SHA-1 after a subscription id's 16 bytes (UUIDv5's namespace), made once per
    subscription and batch by dispatch: copying it costs less than making it again (0.67 µs
    a delivery id, against 1.0 for `hashlib.sha1(..., usedforsecurity=False)`, which looks
    OpenSSL's digest up anew on each call)."""
    return hashlib.sha1(subscription_id, usedforsecurity=False)


def delivery_id_within(namespace: HASH, event_id: bytes) -> uuid.UUID:
    """`delivery_id_for` with the subscription's `namespace_of` and the event id's bytes."""
    state = namespace.copy()
    state.update(event_id)
    return uuid.UUID(int=(int.from_bytes(state.digest()[:16]) & _VERSION_MASK) | _VERSION_5)


# UUID's version (4 bits at 76) and RFC 4122 variant (2 bits at 62).
_VERSION_MASK = ~((0xF000 << 64) | (0xC000 << 48)) & ((1 << 128) - 1)
_VERSION_5 = (5 << 76) | (0x8000 << 48)


class EventTicket:
    """A fetched event message, acknowledged once every delivery of its event is stored.

    Until then the message is the only record of those deliveries: a worker that dies leaves
    it unacknowledged, and JetStream hands it out again.
    """

    __slots__ = ("msg", "outstanding", "touched")

    def __init__(self, msg: Msg, now: float) -> None:
        self.msg = msg
        self.outstanding = 0
        self.touched = now  # received, or last reported in progress

    def settle_one(self) -> bool:
        """One delivery stored; true when it was the last."""
        self.outstanding -= 1
        return self.outstanding == 0


# Not frozen: a frozen dataclass sets each field through object.__setattr__, and dispatch
# builds one job per event and subscription (the hot path). Slots: its fields are read a
# dozen times per attempt.
@dataclass(eq=False, slots=True)
class DeliveryJob:
    """One delivery to attempt. Made as one of two kinds, which the engine treats apart:
    `FirstAttempt` (no row yet) and `StoredDelivery` (its row exists)."""

    # What the kind says, for reading (`isinstance` decides): its delivery row exists.
    stored: ClassVar[bool]

    delivery_id: uuid.UUID
    subscription_id: uuid.UUID
    event_type: str
    event_time: datetime
    # The event's data as JSON, encoded once per event (shared by its deliveries) or read
    # as text from the stored row: never decoded only to be encoded again.
    payload_json: bytes
    attempts: int
    endpoint_url: str
    secrets: list[str]
    headers: dict[str, str]
    timeout_seconds: int
    event_id: uuid.UUID | None = None
    # The subscription's owner: the worker's slots are shared fairly between owners.
    owner: str = ""
    # The request body: the same bytes for every delivery of an event.
    body: bytes = b""
    # The W3C trace context the delivery belongs to (the dispatch's, or the event's when the
    # hub does not trace): a first attempt continues it, a retry links to it.
    traceparent: str | None = None
    tracestate: str | None = None
    # The subscription's setting: send `traceparent`/`tracestate` to the receiver.
    send_trace_context: bool = True
    # The waits between attempts in seconds, the subscription's or else its owner's default
    # (resolved by the read that made the job); None: the service's `retry_schedule_seconds`.
    retry_schedule: Sequence[float] | None = None
    # Its subscription has a rate limit: never sent from dispatch's path, but stored pending
    # and claimed as the subscription's token bucket allows (rate_limit.py).
    rate_limited: bool = False
    # Ordered delivery (issue 32): the key's text (None: unordered, the hot path) and the
    # event's stream sequence. An ordered job is never sent from dispatch: it is stored, and
    # the ordered claim hands out each key's head (store.CLAIM_ORDERED).
    order_key: str | None = None
    order_seq: int = 0
    # Claimed with it, the key's next deliveries (in order), sent one after another in this
    # job's slot while each succeeds; `lease_end` (wall clock): when their leases end.
    then: list[DeliveryJob] | None = None
    lease_end: float = 0.0

    def __post_init__(self) -> None:
        if type(self) is DeliveryJob:  # neither kind: the store would write it nowhere
            raise TypeError("a delivery job is made as a FirstAttempt or a StoredDelivery")
        if not self.body:
            self.body = render_body(self.event_type, self.event_time, self.payload_json)

    @property
    def message_id(self) -> str:
        """`webhook-id`: `message_id_for`'s, inlined (one call less per attempt)."""
        return f"msg_{self.delivery_id.hex}"

    def log_fields(self) -> dict[str, str]:
        """What a log line about this delivery names it by."""
        return {
            "delivery_id": str(self.delivery_id),
            "subscription_id": str(self.subscription_id),
            "webhook_id": self.message_id,
            "event_type": self.event_type,
        }

    def as_stored(self) -> StoredDelivery:
        """The same delivery once its row is written (set aside, and kept by this worker)."""
        return StoredDelivery(*[getattr(self, name) for name in _JOB_FIELDS])


@dataclass(eq=False, slots=True)
class FirstAttempt(DeliveryJob):
    """An event's delivery straight from dispatch, before any attempt: it has no row yet
    (the event message stands for it), and its row is written with its first outcome, or as
    pending when it is set aside. Its attempt continues the dispatch's trace."""

    stored: ClassVar[bool] = False


@dataclass(eq=False, slots=True)
class StoredDelivery(DeliveryJob):
    """A delivery whose row exists: claimed (a retry, or set aside before its first attempt)
    or kept by the worker that set it aside. Its attempt is a row of `delivery_attempts` and
    an update of its row; its trace links to the delivery's; set aside, its lease is
    released."""

    stored: ClassVar[bool] = True


_JOB_FIELDS = tuple(f.name for f in fields(DeliveryJob))


class Failure(StrEnum):
    """Why an attempt got no HTTP answer."""

    TIMEOUT = "timeout"
    REFUSED = "refused"  # the address policy (SSRF) refused the endpoint
    NETWORK = "network"  # no connection, TLS refused, connection reset, ...


class Outcome(StrEnum):
    """An attempt's outcome (also the `outcome` label of the attempt-duration histogram)."""

    DELIVERED = "delivered"  # 2xx
    GONE = "gone"  # 410: the receiver asks us to stop
    THROTTLED = "throttled"  # 429 or 503: Retry-After is honoured
    REJECTED = "rejected"  # any other status
    TIMED_OUT = "timed_out"
    REFUSED = "refused"  # the endpoint's address is not allowed (SSRF)
    UNREACHABLE = "unreachable"  # no answer: connection or TLS error


_FAILURE_OUTCOMES = {
    Failure.TIMEOUT: Outcome.TIMED_OUT,
    Failure.REFUSED: Outcome.REFUSED,
    Failure.NETWORK: Outcome.UNREACHABLE,
}


def outcome_of(status_code: int | None, failure: Failure | None) -> Outcome:
    if status_code is None:
        return _FAILURE_OUTCOMES[failure or Failure.NETWORK]
    if 200 <= status_code < 300:
        return Outcome.DELIVERED
    if status_code == 410:
        return Outcome.GONE
    if status_code in RETRY_AFTER_STATUSES:
        return Outcome.THROTTLED
    return Outcome.REJECTED


class NextStep(NamedTuple):
    """A delivery's state after an attempt (`decisions.next_step`). A tuple: made once per
    recorded attempt, and a frozen dataclass's fields cost a call each to set."""

    status: DeliveryStatus
    next_attempt_at: datetime | None
    completed_at: datetime | None


@dataclass(slots=True)  # not frozen: one per attempt, and frozen fields cost each a call
class AttemptResult:
    job: DeliveryJob
    attempted_at: datetime
    status_code: int | None
    response_body: str | None
    duration_ms: int
    error: str | None
    retry_after: str | None
    failure: Failure | None = None
    # What the answer (or its absence) means: worked out here, once, and read by the span,
    # the metrics, the log lines and the decision of the next step.
    outcome: Outcome = field(init=False)
    # The delivery's next step, decided once (`decisions.decided`, when the attempt is
    # recorded) and read by whatever needs it after: None until then.
    step: NextStep | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.outcome = outcome_of(self.status_code, self.failure)

    @property
    def succeeded(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300
