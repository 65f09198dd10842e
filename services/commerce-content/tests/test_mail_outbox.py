"""The mail outbox against a real SMTP server: an outage delays mail, never loses it; what
cannot be sent is dead-lettered, visibly."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import timedelta
from typing import Any

from commerce_content.settings import Settings
from commerce_content.worker import run as run_worker
from prometheus_client import REGISTRY
from servicekit.embedded.network import free_port
from servicekit.embedded.smtp import ReceivedMail, SmtpServer
from servicekit.mail_outbox import MailRetryPolicy, send_pending_mail
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession
from structlog.testing import capture_logs

QUICK = MailRetryPolicy(
    first_delay=timedelta(milliseconds=20),
    max_delay=timedelta(milliseconds=80),
    max_age=timedelta(days=1),
)


async def queue_mail(
    engine: AsyncEngine,
    subject: str,
    *,
    age: timedelta = timedelta(0),
    attempts: int = 0,
) -> uuid.UUID:
    mail_id = uuid.uuid4()
    async with engine.begin() as conn:
        await conn.execute(
            text(
                "INSERT INTO mail_outbox (id, recipient, subject, body, created_at, attempts)"
                " VALUES (:id, 'owner@shop.example', :subject, 'Body', now() - :age, :attempts)"
            ),
            {"id": mail_id, "subject": subject, "age": age, "attempts": attempts},
        )
    return mail_id


async def mail_row(engine: AsyncEngine, mail_id: uuid.UUID) -> Any:
    async with engine.connect() as conn:
        return (
            await conn.execute(text("SELECT * FROM mail_outbox WHERE id = :id"), {"id": mail_id})
        ).one()


def arrived(server: SmtpServer, subject: str) -> list[ReceivedMail]:
    return [m for m in server.received if m.subject == subject]


def wait_until_arrived(server: SmtpServer, subject: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not arrived(server, subject) and time.monotonic() < deadline:
        time.sleep(0.05)


def dead_lettered(reason: str) -> float:
    return REGISTRY.get_sample_value("mail_dead_lettered_total", {"reason": reason}) or 0.0


async def test_mail_that_failed_more_than_20_times_is_still_sent_when_the_server_answers(
    service_settings: Settings, db_engine: AsyncEngine, smtp_server: SmtpServer
) -> None:
    subject = f"After a long outage {uuid.uuid4().hex[:8]}"
    await queue_mail(db_engine, subject, age=timedelta(hours=1), attempts=25)
    settings = service_settings.model_copy(update={"smtp_url": smtp_server.url})
    stop = asyncio.Event()
    worker = asyncio.create_task(run_worker(settings, stop))
    try:
        await asyncio.to_thread(wait_until_arrived, smtp_server, subject)
    finally:
        stop.set()
        await asyncio.wait_for(worker, 30)
    assert arrived(smtp_server, subject)


async def test_mail_queued_during_an_smtp_outage_arrives_once_the_server_is_back(
    service_settings: Settings, db_engine: AsyncEngine
) -> None:
    port = free_port()
    server = SmtpServer(port=port)  # not started yet: connections are refused
    settings = service_settings.model_copy(update={"smtp_url": server.url})
    sessions = async_sessionmaker(db_engine, class_=AsyncSession, expire_on_commit=False)
    subject = f"Queued in an outage {uuid.uuid4().hex[:8]}"
    mail_id = await queue_mail(db_engine, subject)

    deadline = time.monotonic() + 30
    while (await mail_row(db_engine, mail_id)).attempts <= 21 and time.monotonic() < deadline:
        await send_pending_mail(sessions, settings, QUICK)
        await asyncio.sleep(0.02)
    down = await mail_row(db_engine, mail_id)
    assert down.attempts > 21  # past the 20 attempts after which it used to be dropped
    assert down.dead_at is None
    assert down.sent_at is None
    assert "Connect" in down.last_error or "refused" in down.last_error.lower()

    server.start()
    try:
        while not arrived(server, subject) and time.monotonic() < deadline:
            await send_pending_mail(sessions, settings, QUICK)
            await asyncio.sleep(0.02)
    finally:
        server.stop()
    assert len(arrived(server, subject)) == 1
    assert (await mail_row(db_engine, mail_id)).sent_at is not None


async def test_failed_attempts_back_off_exponentially(
    service_settings: Settings, db_engine: AsyncEngine
) -> None:
    settings = service_settings.model_copy(update={"smtp_url": f"smtp://127.0.0.1:{free_port()}"})
    sessions = async_sessionmaker(db_engine, class_=AsyncSession, expire_on_commit=False)
    mail_id = await queue_mail(db_engine, f"Backoff {uuid.uuid4().hex[:8]}")
    await send_pending_mail(sessions, settings, MailRetryPolicy())
    async with db_engine.connect() as conn:
        wait = await conn.scalar(
            text("SELECT next_attempt_at - now() FROM mail_outbox WHERE id = :id"),
            {"id": mail_id},
        )
    assert timedelta(seconds=1) < wait <= timedelta(seconds=2)
    await send_pending_mail(sessions, settings, MailRetryPolicy())
    assert (await mail_row(db_engine, mail_id)).attempts == 1  # not due again yet


async def test_mail_older_than_the_max_age_is_dead_lettered_logged_and_counted(
    service_settings: Settings, db_engine: AsyncEngine, smtp_server: SmtpServer
) -> None:
    down = service_settings.model_copy(update={"smtp_url": f"smtp://127.0.0.1:{free_port()}"})
    sessions = async_sessionmaker(db_engine, class_=AsyncSession, expire_on_commit=False)
    subject = f"A week old {uuid.uuid4().hex[:8]}"
    mail_id = await queue_mail(db_engine, subject, age=timedelta(days=8))
    before = dead_lettered("max_age")
    with capture_logs() as logs:
        await send_pending_mail(sessions, down, MailRetryPolicy(max_age=timedelta(days=7)))
    row = await mail_row(db_engine, mail_id)
    assert row.dead_at is not None
    assert row.last_error
    assert dead_lettered("max_age") >= before + 1
    assert any(
        log["event"] == "mail dead-lettered"
        and log["log_level"] == "error"
        and log["mail_id"] == str(mail_id)
        for log in logs
    )
    up = service_settings.model_copy(update={"smtp_url": smtp_server.url})
    await send_pending_mail(sessions, up, MailRetryPolicy())
    assert not arrived(smtp_server, subject)  # kept for an operator, never retried


async def test_a_message_that_cannot_be_built_is_dead_lettered_at_once(
    service_settings: Settings, db_engine: AsyncEngine, smtp_server: SmtpServer
) -> None:
    settings = service_settings.model_copy(update={"smtp_url": smtp_server.url})
    sessions = async_sessionmaker(db_engine, class_=AsyncSession, expire_on_commit=False)
    mail_id = await queue_mail(db_engine, "Injected\r\nBcc: someone@example.com")
    before = dead_lettered("unsendable")
    await send_pending_mail(sessions, settings, MailRetryPolicy())
    row = await mail_row(db_engine, mail_id)
    assert row.dead_at is not None
    assert row.attempts == 1
    assert dead_lettered("unsendable") == before + 1


async def test_a_message_that_cannot_be_sent_does_not_stop_the_rest_of_its_batch(
    service_settings: Settings, db_engine: AsyncEngine, smtp_server: SmtpServer
) -> None:
    settings = service_settings.model_copy(update={"smtp_url": smtp_server.url})
    sessions = async_sessionmaker(db_engine, class_=AsyncSession, expire_on_commit=False)
    tag = uuid.uuid4().hex[:8]
    first = await queue_mail(db_engine, f"Before the poison {tag}")
    poison = await queue_mail(db_engine, f"Poison {tag}\r\nBcc: someone@example.com")
    last = await queue_mail(db_engine, f"After the poison {tag}")
    with capture_logs() as lines:
        await send_pending_mail(sessions, settings, MailRetryPolicy())
    await asyncio.to_thread(wait_until_arrived, smtp_server, f"After the poison {tag}")
    assert arrived(smtp_server, f"Before the poison {tag}")
    assert arrived(smtp_server, f"After the poison {tag}")
    assert (await mail_row(db_engine, first)).sent_at is not None
    assert (await mail_row(db_engine, last)).sent_at is not None
    assert (await mail_row(db_engine, poison)).dead_at is not None
    errors = [line for line in lines if line["log_level"] == "error"]
    assert [(line["loop"], line["mail_id"]) for line in errors] == [("mail-outbox", str(poison))]
