"""Outgoing mail over SMTP (aiosmtplib), addressed by `SMTP_URL` (`smtp://user:pass@host:port`)."""

from __future__ import annotations

from collections.abc import Sequence
from email.message import EmailMessage
from urllib.parse import unquote, urlsplit

import aiosmtplib


async def send_mail(
    smtp_url: str,
    *,
    sender: str,
    recipients: Sequence[str],
    subject: str,
    body: str,
    timeout: float = 10.0,
) -> None:
    parts = urlsplit(smtp_url)
    if parts.scheme not in {"smtp", "smtps"}:
        raise ValueError(f"SMTP URL must start with smtp:// or smtps://, got {parts.scheme!r}")
    message = EmailMessage()
    message["From"] = sender
    message["To"] = ", ".join(recipients)
    message["Subject"] = subject
    message.set_content(body)
    await aiosmtplib.send(
        message,
        hostname=parts.hostname or "127.0.0.1",
        port=parts.port or (465 if parts.scheme == "smtps" else 25),
        username=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password else None,
        use_tls=parts.scheme == "smtps",
        start_tls=False if parts.scheme == "smtps" else None,
        timeout=timeout,
    )
