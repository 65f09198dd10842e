"""Sends the mail that transactions wrote to `mail_outbox` (so a notice is never lost to an
SMTP outage: it waits and goes out when the server answers). Any service's worker runs it."""

from __future__ import annotations

import asyncio

import structlog
from sqlalchemy import text

from servicekit.mail import send_mail
from servicekit.runtime import ServiceRuntime
from servicekit.settings import ServiceSettings
from servicekit.worker import WorkerLoop

logger = structlog.get_logger(__name__)
POLL_SECONDS = 2.0
_CLAIM = text(
    """
    SELECT id, recipient, subject, body FROM mail_outbox
    WHERE sent_at IS NULL AND attempts < 20
    ORDER BY created_at LIMIT 20 FOR UPDATE SKIP LOCKED
    """
)
_SENT = text("UPDATE mail_outbox SET sent_at = now(), attempts = attempts + 1 WHERE id = :id")
_FAILED = text("UPDATE mail_outbox SET attempts = attempts + 1, last_error = :error WHERE id = :id")


async def send_pending_mail(runtime: ServiceRuntime, settings: ServiceSettings) -> int:
    sent = 0
    async with runtime.session_factory() as session, session.begin():
        connection = await session.connection()
        for row in (await connection.execute(_CLAIM)).all():
            try:
                await send_mail(
                    settings.smtp_url,
                    sender=settings.smtp_from,
                    recipients=[row.recipient],
                    subject=row.subject,
                    body=row.body,
                )
            except Exception as exc:
                logger.warning(
                    "mail not sent; will retry", recipient=row.recipient, error=repr(exc)
                )
                await connection.execute(_FAILED, {"id": row.id, "error": repr(exc)[:1000]})
                continue
            await connection.execute(_SENT, {"id": row.id})
            sent += 1
    return sent


def mail_loop(settings: ServiceSettings) -> WorkerLoop:
    async def run(runtime: ServiceRuntime, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await send_pending_mail(runtime, settings)
            except Exception as exc:
                logger.warning("mail loop failed", error=repr(exc))
            try:
                await asyncio.wait_for(stop.wait(), POLL_SECONDS)
            except TimeoutError:
                continue

    return run
