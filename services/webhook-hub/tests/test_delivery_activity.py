"""The worker's delivery log: counts per interval at INFO, each failure at WARNING with its
ids, and no line per successful delivery."""

from __future__ import annotations

import asyncio

import httpx
from nats.js import JetStreamContext
from servicekit.testing import HttpReceiver
from sqlalchemy.ext.asyncio import AsyncEngine
from structlog.testing import capture_logs
from webhook_hub import worker as hub_worker
from webhook_hub.delivery_engine.activity import DeliveryActivity
from webhook_hub.delivery_engine.decisions import RetryRules
from webhook_hub.delivery_engine.jobs import Failure, NextStep
from webhook_hub.models import DeliveryStatus
from webhook_hub.settings import Settings

from tests.factories import make_consumer, publish_event, subscribe
from tests.job_factories import make_job, make_result

RULES = RetryRules(schedule=[5, 60], jitter=0.0, retry_after_cap=3600)


def activity(interval: float = 10.0) -> DeliveryActivity:
    return DeliveryActivity(RULES, interval, now=0.0)


def test_successful_deliveries_are_not_logged_one_by_one() -> None:
    log = activity()
    with capture_logs() as lines:
        log.record([make_result() for _ in range(1000)])
    assert lines == []


def test_a_failed_attempt_is_a_warning_with_its_ids() -> None:
    job = make_job()
    log = activity()
    with capture_logs() as lines:
        log.record([make_result(job, status=500)])
    assert lines == [
        {
            "event": "delivery attempt failed",
            "log_level": "warning",
            "delivery_id": str(job.delivery_id),
            "subscription_id": str(job.subscription_id),
            "webhook_id": job.message_id,
            "event_type": "order.paid",
            "attempt": 1,
            "outcome": "rejected",
            "status_code": 500,
            "error": None,
            "retried": True,
        }
    ]


def test_an_attempt_without_an_answer_is_logged_with_its_error() -> None:
    log = activity()
    with capture_logs() as lines:
        log.record([make_result(status=None, failure=Failure.TIMEOUT)])
    [line] = lines
    assert line["outcome"] == "timed_out"
    assert line["status_code"] is None
    assert line["error"] == "no answer"


def test_a_failed_attempt_is_logged_with_the_next_step_recorded_for_it() -> None:
    result = make_result(status=500)  # retried under RULES...
    result.step = NextStep(DeliveryStatus.FAILED, None, result.attempted_at)  # ...not as stored
    log = activity()
    with capture_logs() as lines:
        log.record([result])
    assert lines[0]["retried"] is False
    assert (log.retried, log.given_up) == (0, 1)


def test_the_last_attempt_of_the_schedule_is_logged_as_given_up() -> None:
    log = activity()
    with capture_logs() as lines:
        log.record([make_result(make_job(attempts=2), status=503)])
    assert lines[0]["retried"] is False
    assert (log.retried, log.given_up) == (0, 1)


def test_the_interval_report_counts_attempts_successes_failures_and_retries() -> None:
    log = activity(interval=10.0)
    with capture_logs():
        log.record([make_result(), make_result(), make_result(status=500)])
        log.record([make_result(make_job(attempts=2), status=500), make_result(status=410)])
    with capture_logs() as lines:
        log.report(10.0)
    assert lines == [
        {
            "event": "deliveries attempted",
            "log_level": "info",
            "attempted": 5,
            "succeeded": 2,
            "failed": 3,
            "retried": 1,
            "given_up": 2,
            "seconds": 10.0,
        }
    ]


def test_no_report_before_the_interval_is_over() -> None:
    log = activity(interval=10.0)
    log.record([make_result()])
    with capture_logs() as lines:
        log.report(9.9)
    assert lines == []
    assert log.attempted == 1


def test_each_report_counts_only_its_own_interval() -> None:
    log = activity(interval=10.0)
    log.record([make_result()])
    with capture_logs() as lines:
        log.report(10.0)
        log.record([make_result(), make_result()])
        log.report(20.0)
    assert [line["attempted"] for line in lines] == [1, 2]


def test_an_idle_interval_writes_nothing() -> None:
    log = activity(interval=10.0)
    with capture_logs() as lines:
        log.report(60.0)
    assert lines == []


def test_stopping_reports_what_is_left_at_once() -> None:
    log = activity(interval=10.0)
    log.record([make_result()])
    with capture_logs() as lines:
        log.report(1.0, force=True)
    assert [line["attempted"] for line in lines] == [1]


async def test_the_worker_logs_a_failed_delivery_and_its_counts(
    fast_settings: Settings,
    client: httpx.AsyncClient,
    db_engine: AsyncEngine,
    http_receiver: HttpReceiver,
    js: JetStreamContext,
) -> None:
    consumer = await make_consumer(db_engine, "write")
    created = await subscribe(client, consumer.headers, http_receiver.url, ["order.created"])
    await http_receiver.wait_for(1)  # the probe
    stop = asyncio.Event()
    task = asyncio.create_task(hub_worker.run(fast_settings, stop))
    await http_receiver.wait_for(2)  # the test event: the worker has set up its logging
    with capture_logs() as lines:
        http_receiver.respond_with(502)
        await publish_event(js, "order.created", {"id": 9})
        await http_receiver.wait_for(4)  # a 502, then its retry
        await asyncio.sleep(0.5)
        stop.set()
        await asyncio.wait_for(task, 30)
    # (Subscriptions of earlier tests whose receivers are gone fail too: only ours counts.)
    [failure] = [
        line
        for line in lines
        if line["event"] == "delivery attempt failed" and line["subscription_id"] == created["id"]
    ]
    assert failure["log_level"] == "warning"
    assert failure["subscription_id"] == created["id"]
    assert failure["webhook_id"] == http_receiver.requests[2].headers["webhook-id"]
    assert failure["status_code"] == 502
    assert failure["retried"] is True
    counts = [line for line in lines if line["event"] == "deliveries attempted"]
    assert [line["log_level"] for line in counts] == ["info"] * len(counts)
    assert sum(line["attempted"] for line in counts) >= 2  # and the test event's, if late
    assert sum(line["succeeded"] for line in counts) >= 1
    assert sum(line["failed"] for line in counts) >= 1
    assert sum(line["retried"] for line in counts) >= 1
