"""Two workers per service share the load: both do work, nothing is lost, and a cron
schedule fires once per due time."""

from __future__ import annotations

import asyncio
import itertools
import re
import uuid
from datetime import datetime

import httpx
from conftest import ServiceInfo, Stack
from figures import record
from flows import bearer, subscribe
from receivers import Receiver
from test_faults import all_delivered, count_of_type, produce


async def counter(http: httpx.AsyncClient, worker: dict[str, str], name: str) -> float:
    """The sum of a Prometheus counter's samples on one worker's /metrics."""
    response = await http.get(f"{worker['probe_url']}/metrics")
    assert response.status_code == 200
    pattern = re.compile(rf"^{name}_total(?:{{[^}}]*}})? ([0-9.e+]+)$", re.MULTILINE)
    return sum(float(value) for value in pattern.findall(response.text))


async def counters(http: httpx.AsyncClient, service: ServiceInfo, name: str) -> list[float]:
    return [await counter(http, worker, name) for worker in service.workers]


async def test_two_hub_workers_share_the_deliveries_and_lose_none(
    stack: Stack, http: httpx.AsyncClient, receiver: Receiver
) -> None:
    event_type = f"shared{uuid.uuid4().hex[:6]}.sent"
    subscription = await subscribe(http, stack.hub, receiver.url, ["*"])
    before = await counters(http, stack.hub, "webhook_delivery_attempts")
    await produce(http, stack, event_type, 600)
    await all_delivered(receiver, subscription["secret"], event_type, 600, timeout=120)
    after = await counters(http, stack.hub, "webhook_delivery_attempts")
    shares = [round(a - b) for a, b in zip(after, before, strict=True)]
    assert all(share > 0 for share in shares), shares  # both workers delivered some
    requests = count_of_type(receiver, event_type)
    record(
        "two webhook-hub workers",
        sent=600,
        delivered=600,
        duplicates=requests - 600,
        attempts_per_worker=shares,
    )


async def test_two_scraper_workers_share_the_runs(
    stack: Stack, http: httpx.AsyncClient, shop_website: str
) -> None:
    key = stack.scrapers.cli(
        "api-keys", "create", "--owner", f"load-{uuid.uuid4().hex[:6]}", "--level", "write"
    )
    api = f"{stack.scrapers.url}/api/v1"
    before = await counters(http, stack.scrapers, "scraper_runs_finished")
    runs = []
    for n in range(10):
        scraper = await http.post(
            f"{api}/scrapers",
            # Slow enough (2 pages/s) that a worker holds several runs at once.
            json={"name": f"load {n}", "url": shop_website, "rate_limit": 2, "max_pages": 5},
            headers=bearer(key),
        )
        assert scraper.status_code == 201, scraper.text
        started = await http.post(f"{api}/scrapers/{scraper.json()['id']}/run", headers=bearer(key))
        assert started.status_code == 202, started.text
        runs.append((scraper.json()["id"], started.json()["run_id"]))

    async def finished() -> bool:
        for scraper_id, run_id in runs:
            run = await http.get(f"{api}/scrapers/{scraper_id}/runs/{run_id}", headers=bearer(key))
            if run.json()["status"] != "completed":
                return False
        return True

    for _ in range(240):
        if await finished():
            break
        await asyncio.sleep(0.5)
    assert await finished()
    after = await counters(http, stack.scrapers, "scraper_runs_finished")
    shares = [round(a - b) for a, b in zip(after, before, strict=True)]
    assert sum(shares) == 10
    assert all(share > 0 for share in shares), shares
    record("two scraper-manager workers", runs=10, completed=10, runs_per_worker=shares)


async def test_a_cron_schedule_fires_once_per_due_time_with_two_workers(
    stack: Stack, http: httpx.AsyncClient, shop_website: str
) -> None:
    key = stack.scrapers.cli(
        "api-keys", "create", "--owner", f"cron-{uuid.uuid4().hex[:6]}", "--level", "admin"
    )
    api = f"{stack.scrapers.url}/api/v1"
    scraper = await http.post(
        f"{api}/scrapers",
        # Every 3 seconds (croniter's sixth field is seconds).
        json={"name": "cron", "url": shop_website, "schedule": "* * * * * */3", "max_pages": 1},
        headers=bearer(key),
    )
    assert scraper.status_code == 201, scraper.text
    scraper_id = scraper.json()["id"]
    await asyncio.sleep(16)
    listed = await http.get(
        f"{api}/scrapers/{scraper_id}/runs", params={"limit": 100}, headers=bearer(key)
    )
    deleted = await http.delete(f"{api}/scrapers/{scraper_id}", headers=bearer(key))
    assert deleted.status_code == 204
    fired = sorted(
        _parse(run["created_at"]) for run in listed.json()["data"] if run["trigger"] == "schedule"
    )
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(fired)]
    # Due every 3 s for 16 s: at most one firing per due time (a late tick may bring two
    # due times close together, but two workers firing one due time would be milliseconds
    # apart, and would push the count past the number of due times).
    assert 3 <= len(fired) <= 16 // 3 + 1, fired
    assert all(gap > 0.5 for gap in gaps), gaps
    record("cron every 3 s, two workers, 16 s", firings=len(fired), min_gap_s=round(min(gaps), 2))


def _parse(moment: str) -> datetime:
    return datetime.fromisoformat(moment.replace("Z", "+00:00"))
