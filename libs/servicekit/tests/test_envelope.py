"""The two ways to read an envelope: `CloudEvent` (data as Python objects) and `RawCloudEvent`
(data kept as sent) accept the same envelopes and read the same attributes from them."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

import pytest
from pydantic import ValidationError
from servicekit.events import CloudEvent, RawCloudEvent, new_event_id

EVENT_ID = "0193a5f0-5c2e-7cc1-9d7a-3f6b2e8c1d00"


def envelope(**fields: Any) -> dict[str, Any]:
    """A valid envelope, with `fields` changed (a value of None removes that field)."""
    base: dict[str, Any] = {
        "specversion": "1.0",
        "id": EVENT_ID,
        "source": "tests",
        "type": "order.paid",
        "time": "2026-11-27T07:00:00.123456+00:00",
        "datacontenttype": "application/json",
        "data": {"id": 7, "total": "19.90"},
    }
    base.update(fields)
    return {name: value for name, value in base.items() if value is not None}


def encoded(**fields: Any) -> bytes:
    return json.dumps(envelope(**fields)).encode()


# Envelopes both readers must take or refuse alike: times, ids and types in their odd forms,
# extension attributes, missing attributes, data that is not an object.
CASES: dict[str, bytes] = {
    "plain": encoded(),
    "time in Z": encoded(time="2026-11-27T07:00:00Z"),
    "time without offset": encoded(time="2026-11-27T07:00:00"),
    "time with a space": encoded(time="2026-11-27 07:00:00+00:00"),
    "time in nanoseconds": encoded(time="2026-11-27T07:00:00.123456789+01:00"),
    "time as a date": encoded(time="2026-11-27"),
    "time as a number": encoded(time=1764226800),
    "time missing": encoded(time=None),
    "time not a time": encoded(time="tomorrow"),
    "id without hyphens": encoded(id=uuid.UUID(EVENT_ID).hex),
    "id as a URN": encoded(id=f"urn:uuid:{EVENT_ID}"),
    "id not a UUID": encoded(id="7"),
    "id missing": encoded(id=None),
    "type with one part": encoded(type="order"),
    "type in capitals": encoded(type="Order.Paid"),
    "type ending in a line break": encoded(type="order.paid\n"),
    "type missing": encoded(type=None),
    "source empty": encoded(source=""),
    "source missing": encoded(source=None),
    "another specversion": encoded(specversion="0.3"),
    "another content type": encoded(datacontenttype="text/plain"),
    "tenant and trace context": encoded(
        tenant="acme",
        traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        tracestate="k=v",
    ),
    "tenant not a string": encoded(tenant=5),
    "extension attribute": encoded(partitionkey="p1"),
    "data empty": encoded(data={}),
    "data nested": encoded(data={"a": [1, {"b": None, "c": [True, 1.5, "é"]}]}),
    "data an array": encoded(data=[1, 2]),
    "data a string": encoded(data="x"),
    "data missing": encoded(data=None),
    "data null": encoded().replace(b'{"id": 7, "total": "19.90"}', b"null"),
    "type too long": encoded(type="order." + "x" * 195),
    "type at its longest": encoded(type="order." + "x" * 194),
    "traceparent not well formed": encoded(traceparent="00-abc-def-01", tracestate="k=v"),
    "traceparent of a later version": encoded(
        traceparent="01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-later"
    ),
    "tracestate with a NUL": encoded(
        traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", tracestate="k=\0"
    ),
    "tracestate too long": encoded(tracestate="k=" + "v" * 600),
    "time past the calendar's end in UTC": encoded(time="9999-12-31T23:59:59-01:00"),
    "time at the calendar's start": encoded(time="0001-01-01T00:00:00Z"),
    "data nested 250 levels": encoded().replace(
        b'{"id": 7, "total": "19.90"}', b'{"a":' * 250 + b"1" + b"}" * 250
    ),
    "data with a 5,000-digit integer": encoded().replace(b'"19.90"', b"9" * 5000),
    "data over 4,300 bytes": encoded(data={"notes": ["x" * 100] * 50}),
    "not JSON": b'{"id": ',
    "not an object": b"[1, 2]",
    "data with spaces": (
        b'{"id":"' + EVENT_ID.encode() + b'","source":"s","type":"a.b",'
        b'"time":"2026-11-27T07:00:00Z","data": { "a" : [ 1 , 2 ] } }'
    ),
}


def attributes(event: CloudEvent | RawCloudEvent, data: Any) -> dict[str, Any]:
    return {
        "id": event.id,
        "source": event.source,
        "type": event.type,
        "time": event.time,
        "tenant": event.tenant,
        "traceparent": event.traceparent,
        "tracestate": event.tracestate,
        "data": data,
    }


def read_by_pydantic(raw: bytes) -> dict[str, Any] | None:
    try:
        event = CloudEvent.from_json(raw)
    except ValidationError:
        return None
    return attributes(event, event.data)


def read_raw(raw: bytes) -> dict[str, Any] | None:
    try:
        event = RawCloudEvent.from_json(raw)
    except ValueError:
        return None
    return attributes(event, json.loads(bytes(event.data)))


@pytest.mark.parametrize("raw", CASES.values(), ids=CASES.keys())
def test_the_raw_reader_takes_and_refuses_what_cloudevent_does_and_reads_the_same(
    raw: bytes,
) -> None:
    expected = read_by_pydantic(raw)
    found = read_raw(raw)
    if expected is not None and found is not None:
        if raw == CASES["id missing"]:
            # CloudEvent numbers an event without an id, afresh at each reading.
            expected["id"] = found["id"]
        if raw == CASES["time missing"]:
            # Both take the time of reading: a moment apart.
            assert abs(found["time"] - expected["time"]) < timedelta(seconds=1)
            expected["time"] = found["time"]
        if raw == CASES["time in nanoseconds"]:
            # msgspec rounds to the microsecond where pydantic truncates.
            assert abs(found["time"] - expected["time"]) <= timedelta(microseconds=1)
            expected["time"] = found["time"]
    assert found == expected


def test_data_is_kept_as_the_producer_wrote_it() -> None:
    event = RawCloudEvent.from_json(CASES["data with spaces"])
    assert bytes(event.data) == b'{ "a" : [ 1 , 2 ] }'


def test_a_number_too_large_for_a_float_stays_a_json_number() -> None:
    """Read into a float it is infinite, which JSON cannot write (pydantic writes
    `Infinity`, which PostgreSQL's `json` refuses)."""
    raw = encoded().replace(b'"id": 7', b'"id": 1e400')
    assert bytes(RawCloudEvent.from_json(raw).data) == b'{"id": 1e400, "total": "19.90"}'
    # When the envelope needs CloudEvent's reading (here its id as a URN), such a number
    # becomes null rather than a token no JSON reader takes.
    urn = raw.replace(EVENT_ID.encode(), f"urn:uuid:{EVENT_ID}".encode())
    assert json.loads(bytes(RawCloudEvent.from_json(urn).data)) == {"id": None, "total": "19.90"}


def test_data_that_is_not_utf_8_is_refused() -> None:
    raw = encoded().replace(b'"19.90"', b'"19.90\xff"')
    with pytest.raises(ValidationError):
        RawCloudEvent.from_json(raw)


@pytest.mark.parametrize("depth", [150, 5000])
def test_deeply_nested_data_is_read_or_refused_never_raised_otherwise(depth: int) -> None:
    """msgspec takes data down to Python's recursion limit; deeper, CloudEvent decides (and
    refuses past its 200 levels): a ValueError either way (pydantic's ValidationError), which
    the feed terminates."""
    nested = b'{"a":' * depth + b"1" + b"}" * depth
    raw = encoded().replace(b'{"id": 7, "total": "19.90"}', nested)
    if depth < 200:
        assert bytes(RawCloudEvent.from_json(raw).data) == nested
    else:
        with pytest.raises(ValidationError):
            RawCloudEvent.from_json(raw)


def test_an_event_written_by_cloudevent_is_read_whole() -> None:
    event = CloudEvent(
        id=new_event_id(), source="tests", type="order.paid", data={"id": 7}, tenant="acme"
    )
    read = RawCloudEvent.from_json(event.to_json())
    assert (read.id, read.type, read.time, read.tenant) == (
        event.id,
        event.type,
        event.time,
        event.tenant,
    )
    assert json.loads(bytes(read.data)) == event.data


@pytest.mark.parametrize(
    "case",
    [
        "type too long",
        "time past the calendar's end in UTC",
        "data nested 250 levels",
        "data with a 5,000-digit integer",
    ],
)
def test_what_no_consumer_could_store_or_read_back_is_refused(case: str) -> None:
    """A type longer than consumers store, a time with no UTC form, data the readers of a
    delivery log could not parse again: refused, so a feed terminates the message."""
    with pytest.raises(ValidationError):
        RawCloudEvent.from_json(CASES[case])


@pytest.mark.parametrize(
    "case",
    [
        "traceparent not well formed",
        "traceparent of a later version",
        "tracestate with a NUL",
        "tracestate too long",
    ],
)
def test_a_trace_context_not_well_formed_is_ignored_and_the_event_kept(case: str) -> None:
    event = RawCloudEvent.from_json(CASES[case])
    assert event.id == uuid.UUID(EVENT_ID)
    assert event.traceparent is None or case.startswith("tracestate")
    assert event.tracestate is None or case.startswith("traceparent")


def test_large_data_is_checked_and_still_kept_as_sent() -> None:
    raw = CASES["data over 4,300 bytes"]
    assert bytes(RawCloudEvent.from_json(raw).data) == json.dumps(json.loads(raw)["data"]).encode()
