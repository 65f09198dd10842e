"""Which deliveries an event makes, from what dispatch's one read found (no database: the
read's rows are made here in `MATCHING`'s column order)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import msgspec
from servicekit.events import CloudEvent, RawCloudEvent
from structlog.testing import capture_logs
from webhook_hub.delivery_engine.jobs import delivery_id_for
from webhook_hub.dispatch.handler import Dispatcher, Matched
from webhook_hub.expressions import event_time_text
from webhook_hub.settings import Settings
from webhook_hub.wire_format import render_body

NEW_SECRET = "bmV3LXNlY3JldC1uZXctc2VjcmV0LW5ldy1z"
OLD_SECRET = "b2xkLXNlY3JldC1vbGQtc2VjcmV0LW9sZC1z"


def subscription_row(
    events: list[str],
    *,
    owner: str = "acme",
    approved: bool = False,
    rotated_ago: timedelta | None = None,
    personal: list[str] | None = None,
    stored: list[list[uuid.UUID]] | None = None,
    retry_schedule: list[int] | None = None,
    timeout_in_effect: int | None = 10,
    filter: str | None = None,
    transform: str | None = None,
    rate_limited: bool = False,
    ordering: dict[str, Any] | None = None,
) -> tuple[Any, ...]:
    rotated_at = None if rotated_ago is None else datetime.now(UTC) - rotated_ago
    return (
        uuid.uuid4(),
        owner,
        events,
        "https://example.com/hook",
        NEW_SECRET,
        OLD_SECRET if rotated_at else None,
        rotated_at,
        {"x-team": "billing"},
        10,
        True,
        approved,
        retry_schedule,
        timeout_in_effect,
        filter,
        transform,
        rate_limited,
        ordering,
        personal or [],
        stored or [],
    )


def event(event_type: str = "order.paid", tenant: str | None = None) -> RawCloudEvent:
    """As dispatch reads it from its message."""
    made = CloudEvent(source="tests", type=event_type, data={"id": 7}, tenant=tenant)
    return RawCloudEvent.from_json(made.to_json())


def dispatcher() -> Dispatcher:
    return Dispatcher(Settings())


def test_an_event_makes_one_delivery_per_subscription_to_its_type_or_to_every_type() -> None:
    paid, wildcard, other = (
        subscription_row(["order.paid"]),
        subscription_row(["*"]),
        subscription_row(["order.created"]),
    )
    paid_event = event()
    [jobs] = dispatcher().deliveries_of(Matched.of([paid, wildcard, other]), [paid_event])
    assert [job.subscription_id for job in jobs] == [paid[0], wildcard[0]]
    assert [job.delivery_id for job in jobs] == [
        delivery_id_for(paid[0], paid_event.id),
        delivery_id_for(wildcard[0], paid_event.id),
    ]


def test_a_delivery_carries_its_subscriptions_settings_and_the_rendered_event() -> None:
    row = subscription_row(["order.paid"])
    paid_event = event()
    [[job]] = dispatcher().deliveries_of(Matched.of([row]), [paid_event])
    assert (job.endpoint_url, job.headers, job.timeout_seconds, job.owner) == (
        "https://example.com/hook",
        {"x-team": "billing"},
        10,
        "acme",
    )
    assert job.secrets == [NEW_SECRET]
    assert job.body == render_body("order.paid", paid_event.time, b'{"id":7}')
    assert (job.stored, job.attempts, job.event_id) == (False, 0, paid_event.id)


def test_an_event_for_one_tenant_reaches_only_that_owners_subscriptions() -> None:
    theirs, others = subscription_row(["*"], owner="acme"), subscription_row(["*"], owner="zeta")
    [jobs] = dispatcher().deliveries_of(Matched.of([theirs, others]), [event(tenant="acme")])
    assert [job.subscription_id for job in jobs] == [theirs[0]]


def test_a_personal_type_reaches_approved_owners_only_unless_the_event_is_the_owners_own() -> None:
    personal = ["customer.updated"]
    approved = subscription_row(["*"], owner="acme", approved=True, personal=personal)
    unapproved = subscription_row(["*"], owner="zeta", personal=personal)
    matched = Matched.of([approved, unapproved])
    to_all, to_zeta = event("customer.updated"), event("customer.updated", tenant="zeta")
    [for_all, for_zeta] = dispatcher().deliveries_of(matched, [to_all, to_zeta])
    assert [job.subscription_id for job in for_all] == [approved[0]]
    assert [job.subscription_id for job in for_zeta] == [unapproved[0]]


def test_a_delivery_stored_before_is_not_made_again() -> None:
    seen, fresh = event(), event()
    row = subscription_row(["order.paid"])
    stored_row = (*row[:-1], [[row[0], seen.id]])
    jobs = dispatcher().deliveries_of(Matched.of([stored_row]), [seen, fresh])
    assert [[job.event_id for job in event_jobs] for event_jobs in jobs] == [[], [fresh.id]]


def test_during_a_rotations_transition_both_secrets_sign_and_after_it_only_the_new() -> None:
    rotating = subscription_row(["*"], rotated_ago=timedelta(minutes=5))
    rotated = subscription_row(["*"], rotated_ago=timedelta(minutes=11))
    [jobs] = dispatcher().deliveries_of(Matched.of([rotating, rotated]), [event()])
    assert [job.secrets for job in jobs] == [[NEW_SECRET, OLD_SECRET], [NEW_SECRET]]


def test_no_subscription_matched_makes_no_delivery_for_any_event() -> None:
    assert dispatcher().deliveries_of(Matched.of([]), [event(), event()]) == [[], []]


def test_a_deliverys_id_is_the_uuid5_of_its_subscription_and_event_whatever_the_version() -> None:
    # Fixed across releases: an event redelivered after an upgrade must find its delivery.
    subscription = uuid.UUID("6f1c2f4e-2b7d-4c1e-9a55-0d3c1b2a4e10")
    event_id = uuid.UUID("0b9e7a62-8d41-4f6a-b3c2-5e7f9a1d2c33")
    delivery_id = delivery_id_for(subscription, event_id)
    assert delivery_id == uuid.UUID("fc4bbc35-4c5e-5433-88e1-f476b3104a18")
    assert (delivery_id.version, delivery_id.variant) == (5, uuid.RFC_4122)


def test_a_bodys_timestamp_is_the_events_time_in_utc_as_isoformat_writes_it() -> None:
    """The same bytes whatever offset the producer wrote (a retry of a stored delivery and
    the portal's as-sent view render the body again)."""
    paris = timezone(timedelta(hours=1))
    cases = {
        datetime(2026, 11, 26, 10, 0, tzinfo=UTC): "2026-11-26T10:00:00Z",
        datetime(2026, 11, 26, 10, 0, 0, 250000, tzinfo=UTC): "2026-11-26T10:00:00.250000Z",
        datetime(2026, 11, 26, 11, 0, 0, 5, tzinfo=paris): "2026-11-26T10:00:00.000005Z",
        CloudEvent.from_json(
            b'{"source":"s","type":"a.b","time":"2026-11-26T10:00:00.5+00:00","data":{}}'
        ).time: "2026-11-26T10:00:00.500000Z",
    }
    for time, written in cases.items():
        body = render_body("order.paid", time, b'{"id":7}')
        assert body == (
            b'{"type":"order.paid","timestamp":"' + written.encode() + b'","data":{"id":7}}'
        )


def test_a_subscription_whose_row_raises_is_left_out_and_named_and_the_others_get_theirs() -> None:
    healthy = subscription_row(["order.paid"])
    # A rotation time the transition window cannot be added to (past the calendar's end).
    broken = list(subscription_row(["order.paid"], rotated_ago=timedelta(0)))
    broken[6] = datetime(9999, 12, 31, 23, 59, tzinfo=UTC)
    paid_event = event()
    with capture_logs() as lines:
        [jobs] = dispatcher().deliveries_of(Matched.of([tuple(broken), healthy]), [paid_event])
    assert [job.subscription_id for job in jobs] == [healthy[0]]
    errors = [line for line in lines if line["log_level"] == "error"]
    assert [(e["loop"], e["subscription_id"], e["event_ids"]) for e in errors] == [
        ("dispatch", str(broken[0]), [str(paid_event.id)])
    ]


def test_an_event_that_raises_has_its_error_and_the_others_get_their_deliveries() -> None:
    row = subscription_row(["order.paid"])
    before, after = event(), event()
    # A time at the calendar's end in a zone west of UTC: it cannot be written in UTC.
    poison = msgspec.structs.replace(
        event(), time=datetime(9999, 12, 31, 23, 0, tzinfo=timezone(timedelta(hours=-5)))
    )
    per_event = dispatcher().deliveries_of(Matched.of([row]), [before, poison, after])
    assert list(per_event.failed) == [1]
    assert isinstance(per_event.failed[1], OverflowError)
    assert [[job.event_id for job in jobs] for jobs in per_event] == [[before.id], [], [after.id]]


def test_a_delivery_carries_the_retry_schedule_and_timeout_its_read_resolved() -> None:
    row = subscription_row(["order.paid"], retry_schedule=[5, 60], timeout_in_effect=3)
    [[job]] = dispatcher().deliveries_of(Matched.of([row]), [event()])
    assert (job.retry_schedule, job.timeout_seconds) == ([5, 60], 3)


def test_a_subscription_and_owner_that_set_nothing_get_the_services_settings() -> None:
    settings = Settings(delivery_timeout_seconds=7)
    row = subscription_row(["order.paid"], retry_schedule=None, timeout_in_effect=None)
    [[job]] = Dispatcher(settings).deliveries_of(Matched.of([row]), [event()])
    # No schedule on the job: next_step takes the settings' `retry_schedule_seconds`.
    assert (job.retry_schedule, job.timeout_seconds) == (None, 7)


# --- CEL filters and transforms (issue 32) ----------------------------------------------------


def order_event(total: int) -> RawCloudEvent:
    made = CloudEvent(
        source="tests", type="order.paid", data={"order_id": "o-1", "total": total}, tenant=None
    )
    return RawCloudEvent.from_json(made.to_json())


def test_a_filter_leaves_out_the_events_it_is_false_of_and_counts_them() -> None:
    from webhook_hub.dispatch.expression_tally import TALLY

    TALLY.take()
    big = subscription_row(["order.paid"], filter="event.data.total > 100")
    plain = subscription_row(["order.paid"])
    small, large = order_event(50), order_event(150)
    jobs = dispatcher().deliveries_of(Matched.of([big, plain]), [small, large])
    assert [[job.subscription_id for job in per] for per in jobs] == [
        [plain[0]],
        [big[0], plain[0]],
    ]
    assert TALLY.take()[big[0]].filtered == 1


def test_a_transform_replaces_data_in_the_body_and_payload_of_its_subscription_only() -> None:
    shaped = subscription_row(
        ["order.paid"], transform='{"order": event.data.order_id, "cents": event.data.total * 100}'
    )
    plain = subscription_row(["order.paid"])
    paid = order_event(150)
    [[first, second]] = dispatcher().deliveries_of(Matched.of([shaped, plain]), [paid])
    assert msgspec.json.decode(first.payload_json) == {"order": "o-1", "cents": 15000}
    assert msgspec.json.decode(first.body)["data"] == {"order": "o-1", "cents": 15000}
    assert msgspec.json.decode(second.body)["data"] == {"order_id": "o-1", "total": 150}


def test_an_expression_failing_on_an_event_leaves_it_undelivered_and_counts_the_error() -> None:
    from webhook_hub.dispatch.expression_tally import TALLY

    TALLY.take()
    failing = subscription_row(["order.paid"], transform="{'x': event.data.missing}")
    plain = subscription_row(["order.paid"])
    [jobs] = dispatcher().deliveries_of(Matched.of([failing, plain]), [order_event(1)])
    assert [job.subscription_id for job in jobs] == [plain[0]]
    counts = TALLY.take()[failing[0]]
    assert counts.transform_errors == 1
    assert counts.last_error is not None
    assert "missing" in counts.last_error


def test_a_stored_expression_that_no_longer_compiles_is_counted_as_an_error() -> None:
    from webhook_hub.dispatch.expression_tally import TALLY

    TALLY.take()
    broken = subscription_row(["order.paid"], filter="event.type ==")
    [jobs] = dispatcher().deliveries_of(Matched.of([broken]), [order_event(1)])
    assert jobs == []
    assert TALLY.take()[broken[0]].filter_errors == 1


def test_an_event_expressions_cannot_read_is_counted_for_them_and_still_sent_to_the_others() -> (
    None
):
    from webhook_hub.dispatch.expression_tally import TALLY

    TALLY.take()
    filtered = subscription_row(["order.paid"], filter="event.data.amount > 1")
    plain = subscription_row(["order.paid"])
    # A number past a float's range: valid JSON, which expressions cannot read.
    envelope = (
        b'{"specversion":"1.0","id":"' + str(uuid.uuid4()).encode() + b'","source":"tests",'
        b'"type":"order.paid","time":"2026-11-29T07:00:00Z","data":{"amount": 1e400}}'
    )
    [jobs] = dispatcher().deliveries_of(
        Matched.of([filtered, plain]), [RawCloudEvent.from_json(envelope)]
    )
    assert [job.subscription_id for job in jobs] == [plain[0]]
    assert TALLY.take()[filtered[0]].filter_errors == 1


def test_an_ordering_key_sees_event_time_as_filters_and_transforms_do() -> None:
    paid = order_event(150)
    stamped = event_time_text(paid.time)
    assert stamped.endswith("Z")
    keyed = subscription_row(["order.paid"], ordering={"key": "event.time"})
    shaped = subscription_row(["order.paid"], transform='{"at": event.time}')
    [[by_time, reshaped]] = dispatcher().deliveries_of(
        Matched.of([keyed, shaped]), [paid], sequences=lambda: [1]
    )
    assert by_time.order_key == stamped
    assert msgspec.json.decode(reshaped.payload_json) == {"at": stamped}
