"""Sends the mail that transactions wrote to `mail_outbox`. Any service's worker runs it.

An SMTP outage delays mail, never loses it: a failed message is tried again after a delay
that doubles from `MAIL_RETRY_FIRST_SECONDS` up to `MAIL_RETRY_MAX_SECONDS` (an hour), for
`MAIL_MAX_AGE_HOURS` (a week). Only then, or at once when no retry can help (a message that
cannot be built, a 5xx for its recipients or content), is it dead-lettered: kept with
`dead_at` and its last error, logged at error level and counted (`mail_dead_lettered_total`,
`mail_outbox_dead`), and deleted only `MAIL_RETENTION_DAYS` later, as sent mail is
(servicekit.retention). Each message is tried on its own: one that raises is
retried or dead-lettered and the rest of its batch goes on.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime, timedelta

import structlog
from prometheus_client import Counter, Gauge
from sqlalchemy import text
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from servicekit.mail import is_permanent, send_mail
from servicekit.runtime import ServiceRuntime
from servicekit.settings import ServiceSettings
from servicekit.worker import WorkerLoop

logger = structlog.get_logger(__name__)
BATCH = 20
LOOP = "mail-outbox"

MAIL_SENT = Counter("mail_sent_total", "Mail messages handed to the SMTP server")
MAIL_FAILED_ATTEMPTS = Counter(
    "mail_failed_attempts_total", "Attempts to send a mail message that failed"
)
MAIL_DEAD_LETTERED = Counter(
    "mail_dead_lettered_total",
    "Mail messages given up (kept in mail_outbox with dead_at)",
    ["reason"],
)
MAIL_PENDING = Gauge("mail_outbox_pending", "Mail messages waiting to be sent")
MAIL_DEAD = Gauge("mail_outbox_dead", "Dead-lettered mail messages in mail_outbox")


@dataclass(frozen=True)
class MailRetryPolicy:
    """When a failed message is tried again, and when it is given up."""

    first_delay: timedelta = timedelta(seconds=2)
    max_delay: timedelta = timedelta(hours=1)
    max_age: timedelta = timedelta(days=7)

    @classmethod
    def of(cls, settings: ServiceSettings) -> MailRetryPolicy:
        return cls(
            first_delay=timedelta(seconds=settings.mail_retry_first_seconds),
            max_delay=timedelta(seconds=settings.mail_retry_max_seconds),
            max_age=timedelta(hours=settings.mail_max_age_hours),
        )

    def delay(self, failures: int) -> timedelta:
        """The wait after the `failures`-th failed attempt (1, 2, ...): doubling, capped."""
        doublings = max(0, min(failures - 1, 60))  # 2**60 seconds outgrow any cap
        seconds = self.first_delay.total_seconds() * 2.0**doublings
        return min(self.max_delay, timedelta(seconds=min(seconds, 1e9)))

    def gives_up(self, created_at: datetime, now: datetime) -> bool:
        return now - created_at >= self.max_age


_CLAIM = text(
    """
    SELECT id, recipient, subject, body, attempts, created_at, now() AS now FROM mail_outbox
    WHERE sent_at IS NULL AND dead_at IS NULL AND next_attempt_at <= now()
    ORDER BY next_attempt_at LIMIT :batch FOR UPDATE SKIP LOCKED
    """
)
_SENT = text("UPDATE mail_outbox SET sent_at = now(), attempts = attempts + 1 WHERE id = :id")
_RETRY = text(
    """
    UPDATE mail_outbox SET attempts = attempts + 1, last_error = :error,
        next_attempt_at = now() + :delay
    WHERE id = :id
    """
)
_DEAD = text(
    """
    UPDATE mail_outbox SET attempts = attempts + 1, last_error = :error, dead_at = now()
    WHERE id = :id
    """
)
_COUNTS = text(
    """
    SELECT count(*) FILTER (WHERE dead_at IS NULL) AS pending,
           count(*) FILTER (WHERE dead_at IS NOT NULL) AS dead
    FROM mail_outbox WHERE sent_at IS NULL
    """
)


async def send_pending_mail(
    session_factory: async_sessionmaker[AsyncSession],
    settings: ServiceSettings,
    policy: MailRetryPolicy,
) -> int:
    """Try every message that is due once; returns how many were sent."""
    sent = 0
    async with session_factory() as session, session.begin():
        connection = await session.connection()
        for row in (await connection.execute(_CLAIM, {"batch": BATCH})).all():
            try:
                await send_mail(
                    settings.smtp_url,
                    sender=settings.smtp_from,
                    recipients=[row.recipient],
                    subject=row.subject,
                    body=row.body,
                )
            except Exception as exc:
                MAIL_FAILED_ATTEMPTS.inc()
                error = repr(exc)[:1000]
                permanent = is_permanent(exc)
                if permanent or policy.gives_up(row.created_at, row.now):
                    reason = "unsendable" if permanent else "max_age"
                    await connection.execute(_DEAD, {"id": row.id, "error": error})
                    MAIL_DEAD_LETTERED.labels(reason=reason).inc()
                    logger.error(
                        "mail dead-lettered",
                        loop=LOOP,
                        mail_id=str(row.id),
                        recipient=row.recipient,
                        reason=reason,
                        attempts=row.attempts + 1,
                        error=error,
                    )
                    continue
                delay = policy.delay(row.attempts + 1)
                await connection.execute(_RETRY, {"id": row.id, "error": error, "delay": delay})
                logger.warning(
                    "mail not sent; will retry",
                    loop=LOOP,
                    mail_id=str(row.id),
                    recipient=row.recipient,
                    retry_in_seconds=delay.total_seconds(),
                    error=error,
                )
                continue
            await connection.execute(_SENT, {"id": row.id})
            MAIL_SENT.inc()
            sent += 1
    return sent


async def count_unsent_mail(session_factory: async_sessionmaker[AsyncSession]) -> None:
    """Refresh the pending and dead gauges from the table (true across restarts)."""
    async with session_factory() as session:
        connection = await session.connection()
        counts = (await connection.execute(_COUNTS)).one()
    MAIL_PENDING.set(counts.pending)
    MAIL_DEAD.set(counts.dead)


def mail_loop(settings: ServiceSettings) -> WorkerLoop:
    policy = MailRetryPolicy.of(settings)

    async def run(runtime: ServiceRuntime, stop: asyncio.Event) -> None:
        runtime.progress.beat(LOOP, settings.mail_poll_seconds)
        while not stop.is_set():
            try:
                await send_pending_mail(runtime.session_factory, settings, policy)
                await count_unsent_mail(runtime.session_factory)
                runtime.progress.beat(LOOP, settings.mail_poll_seconds)
            except Exception as exc:
                logger.warning("mail loop failed", error=repr(exc))
            try:
                await asyncio.wait_for(stop.wait(), settings.mail_poll_seconds)
            except TimeoutError:
                continue

    return run
