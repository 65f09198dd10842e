"""The enforced rate limit (issue 32): a subscription limited to 200/s, two worker processes.

Starts embedded PostgreSQL and NATS, a receiver on 127.0.0.1 (bench/receiver.py, in a
process of its own, logging each receipt's time and webhook-id) and two workers; publishes
`rate x seconds` events at once (a backlog the limit must hold back), and counts the
arrivals per second at the receiver until every one has arrived. Prints the rate of each
second, their mean and standard deviation, the rate over the whole drain, and the target line.

    uv run python services/webhook-hub/bench/rate_limit.py [--seconds 60] [--rate 200]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psycopg
import uvloop
from servicekit.embedded.network import wait_for_port
from servicekit.signing import generate_secret

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import HERE, Bench  # the bench's sibling module, not a package

TOLERANCE = 0.05


def receipts(log: Path) -> list[tuple[float, str]]:
    """(time, webhook-id) of each POST the receiver logged (it writes every second)."""
    if not log.exists():
        return []
    rows = []
    for line in log.read_text().splitlines():
        at, _, webhook_id = line.partition(" ")
        rows.append((float(at), webhook_id))
    return rows


def logging_receipts(bench: Bench, log: Path) -> None:
    """The bench's receiver again, logging each receipt's time (bench/receiver.py's second
    argument)."""
    assert bench.receiver is not None
    bench.receiver.terminate()
    bench.receiver.wait(10)
    bench.receiver = subprocess.Popen(
        [sys.executable, str(HERE / "receiver.py"), str(bench.receiver_port), str(log)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for_port("127.0.0.1", bench.receiver_port, 30)


def limited_subscription(bench: Bench, event_type: str, rate: float, burst: int | None) -> str:
    with psycopg.connect(bench.database_url) as conn:
        consumer = uuid.uuid4()
        conn.execute(
            "INSERT INTO consumers (owner, id, created_at) VALUES ('bench-rate', %s, now())"
            " ON CONFLICT DO NOTHING",
            (consumer,),
        )
        row = conn.execute("SELECT id FROM consumers WHERE owner = 'bench-rate'").fetchone()
        assert row is not None
        subscription = uuid.uuid4()
        conn.execute(
            "INSERT INTO subscriptions (id, consumer_id, owner, endpoint_url, secret, events,"
            " is_active, headers, timeout_seconds, created_at, updated_at,"
            " rate_limit_per_second, rate_limit_burst)"
            " VALUES (%s, %s, 'bench-rate', %s, %s, %s, true, '{}', 10, now(), now(), %s, %s)",
            (
                subscription,
                row[0],
                f"http://127.0.0.1:{bench.receiver_port}/limited",
                generate_secret(),
                [event_type],
                rate,
                burst,
            ),
        )
    return str(subscription)


def outcomes(bench: Bench, subscription: str) -> tuple[int, int, int]:
    """(deliveries stored, failed or retried ones, failed attempts) of the subscription."""
    with psycopg.connect(bench.database_url) as conn:
        row = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE status <> 'succeeded' OR attempts <> 1)"
            " FROM deliveries WHERE subscription_id = %s",
            (subscription,),
        ).fetchone()
        failed = conn.execute(
            "SELECT count(*) FROM delivery_attempts a JOIN deliveries d ON d.id = a.delivery_id"
            " WHERE d.subscription_id = %s AND NOT coalesce(a.status_code BETWEEN 200 AND 299,"
            " false)",
            (subscription,),
        ).fetchone()
    assert row is not None
    assert failed is not None
    return int(row[0]), int(row[1]), int(failed[0])


async def main_async(args: argparse.Namespace) -> int:
    rate, seconds = args.rate, args.seconds
    events = int(rate * seconds)
    burst = args.burst if args.burst else max(1, int(rate))
    with tempfile.TemporaryDirectory(prefix="rate-bench-") as tmp:
        workdir = Path(tmp)
        bench = Bench(workdir, durable=not args.unsafe_fast_db, python_receiver=True)
        log = workdir / "receipts.log"
        try:
            bench.start()
            logging_receipts(bench, log)
            event_type = f"bench.rate{uuid.uuid4().hex[:6]}"
            subscription = limited_subscription(bench, event_type, rate, args.burst)
            for _ in range(args.workers):
                bench.start_worker()
            await bench.workers_waiting(args.workers)
            started = time.time()
            await bench.publish(events, None, event_type)
            published = time.time() - started
            deadline = time.time() + seconds * 1.5 + 60
            while time.time() < deadline:
                if len(receipts(log)) >= events:
                    break
                await asyncio.sleep(1)
            await asyncio.sleep(1.5)  # the receiver's last write, and any duplicate
            stored, not_first_time, failed = outcomes(bench, subscription)
        finally:
            bench.stop()
        rows = receipts(log)
    if not rows:
        print("no delivery arrived: MISSED")
        return 1
    times = sorted(at for at, _ in rows)
    distinct = len({webhook_id for _, webhook_id in rows})
    first, last = times[0], times[-1]
    per_second = [0] * (int(last - first) + 1)
    for at in times:
        per_second[int(at - first)] += 1
    # Whole seconds after the first (which also holds the bucket's burst); the last is partial.
    steady = per_second[1:-1] or per_second
    mean = statistics.fmean(steady)
    spread = statistics.pstdev(steady)
    overall = (len(times) - burst) / (last - first) if last > first else float("inf")
    print(f"rate limit {rate:g}/s (burst {burst}), {args.workers} workers, {events} events")
    print(f"published in {published:.1f} s (a backlog the limit holds back)")
    print("second  arrivals")
    for n, count in enumerate(per_second):
        print(f"{n:>6}  {count:>8}")
    print(f"per second (whole seconds after the first): {mean:.1f} ± {spread:.1f}")
    print(f"over the drain: {len(times)} arrivals in {last - first:.2f} s: {overall:.1f}/s")
    print(
        f"distinct {distinct} of {events}, duplicates {len(rows) - distinct}, stored {stored},"
        f" not succeeded at their first attempt {not_first_time}, failed attempts {failed}"
    )
    ok = (
        abs(overall - rate) <= TOLERANCE * rate
        and abs(mean - rate) <= TOLERANCE * rate
        and distinct == events
        and not_first_time == 0
        and failed == 0
    )
    verdict = "met" if ok else "MISSED"
    print(
        f"target: {rate:g}/s ± {TOLERANCE:.0%} over {seconds:g} s, none failed or dropped:"
        f" {verdict}"
    )
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60, help="length of the drain")
    parser.add_argument("--rate", type=float, default=200, help="the subscription's limit")
    parser.add_argument("--burst", type=int, default=None, help="its burst (default: rate)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes")
    parser.add_argument("--unsafe-fast-db", action="store_true", help="PostgreSQL without fsync")
    return uvloop.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
