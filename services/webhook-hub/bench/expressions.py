"""`make bench` row for issue 32's CEL filters and transforms: the CPU a subscription's
`filter` and `transform` add per event to the drain.

Expressions run in one place of the drain, dispatch's `Dispatcher.deliveries_of` (the
event's deliveries made from the batch's matched subscription rows); sending, recording and
acknowledging are the same bytes of work with or without them (a transform changes the body
sent, not the work). So this measures that step in process, on the drain's batches (500
events, as `dispatch_batch_size`), for one subscription without expressions, with the
issue's filter, with a transform building a map, and with both, and prints the CPU per event
each adds to the same step without expressions (process CPU time, median of `--rounds`
rounds, so that a neighbour's burst on a shared machine moves one round, not the figure).

The events are an order's (a total, a currency, two items), half of them passing the
filter. Nothing is started: no server, no socket; it runs in a few seconds.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from servicekit.events import CloudEvent, RawCloudEvent
from webhook_hub.dispatch.expression_tally import TALLY
from webhook_hub.dispatch.handler import Dispatcher, Matched
from webhook_hub.settings import Settings

FILTER = 'event.type == "order.paid" && event.data.total > 100'
TRANSFORM = (
    '{"order": event.data.order_id, "amount": event.data.total, '
    '"currency": event.data.currency, "customer": event.data.customer.id}'
)
TARGET_US = 15.0
SECRET = "bmV3LXNlY3JldC1uZXctc2VjcmV0LW5ldy1z"  # noqa: S105 - a bench's, signs nothing


def subscription_row(filter: str | None, transform: str | None) -> tuple[Any, ...]:
    """A row as `delivery_engine.store.MATCHING` reads it."""
    return (
        uuid.uuid4(),
        "bench",
        ["order.paid"],
        "http://127.0.0.1:9/hook",
        SECRET,
        None,
        None,
        {},
        10,
        True,
        False,  # approved
        None,  # retry_schedule
        10,  # timeout in effect
        filter,
        transform,
        False,  # rate_limited
        None,  # ordering
        [],
        [],
    )


FILTER_COLUMN = 13  # of a MATCHING row


def order_events(count: int) -> list[RawCloudEvent]:
    events = []
    for n in range(count):
        made = CloudEvent(
            source="bench",
            type="order.paid",
            data={
                "order_id": f"o-{n}",
                "total": 50 + (n % 2) * 100,
                "currency": "EUR",
                "customer": {"id": f"c-{n % 97}", "country": "FR"},
                "items": [{"sku": "a-1", "qty": 1}, {"sku": "b-2", "qty": 3}],
                "sent_at": datetime.now(UTC).isoformat(),
            },
        )
        events.append(RawCloudEvent.from_json(made.to_json()))
    return events


def cpu_per_event(
    dispatcher: Dispatcher, rows: list[tuple[Any, ...]], events: list[RawCloudEvent], rounds: int
) -> float:
    """The median over `rounds` of one batch's CPU per event, in µs."""
    matched = Matched.of(rows)
    # Warm (compiled once per worker, as in one), and checked: every event delivered, or
    # the half the filter passes, and nothing failed.
    made = sum(len(jobs) for jobs in dispatcher.deliveries_of(matched, events))
    failed = TALLY.take()
    assert not any(c.filter_errors or c.transform_errors for c in failed.values()), failed
    assert made == (len(events) // 2 if rows[0][FILTER_COLUMN] else len(events)), made
    figures = []
    for _ in range(rounds):
        started = time.process_time()
        dispatcher.deliveries_of(matched, events)
        figures.append((time.process_time() - started) / len(events) * 1e6)
        TALLY.take()
    return statistics.median(figures)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=41)
    args = parser.parse_args()
    dispatcher = Dispatcher(Settings())
    events = order_events(args.batch)
    configurations = {
        "none": (None, None),
        "filter": (FILTER, None),
        "transform": (None, TRANSFORM),
        "filter+transform": (FILTER, TRANSFORM),
    }
    # Interleaved, twice: a drift of the machine's pace during the run hits every row alike.
    figures: dict[str, list[float]] = {name: [] for name in configurations}
    for _ in range(2):
        for name, (check, transform) in configurations.items():
            rows = [subscription_row(check, transform)]
            figures[name].append(cpu_per_event(dispatcher, rows, events, args.rounds))
    base = min(figures["none"])
    print(
        f"CEL expressions on the drain's dispatch step ({args.batch} events a batch, "
        f"half passing the filter; CPU µs per event, median of {args.rounds} rounds)"
    )
    print(f"{'subscription':<18} {'µs/event':>9} {'added':>7}")
    added: dict[str, float] = {}
    for name, values in figures.items():
        value = min(values)
        added[name] = value - base
        print(f"{name:<18} {value:>9.2f} {added[name]:>7.2f}")
    print(f"filter:    {FILTER}")
    print(f"transform: {TRANSFORM}")
    for name in ("filter", "transform"):
        ok = added[name] <= TARGET_US
        print(
            f"target: a {name} adds <= {TARGET_US:.0f} µs CPU per event: "
            f"{added[name]:.2f} µs {'met' if ok else 'MISSED'}"
        )


if __name__ == "__main__":
    main()
