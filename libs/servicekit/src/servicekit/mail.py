"""Outgoing mail over SMTP (aiosmtplib), addressed by `SMTP_URL` (`smtp://user:pass@host:port`)."""

from __future__ import annotations

from collections.abc import Sequence
from email.message import EmailMessage
from urllib.parse import unquote, urlsplit

import aiosmtplib


class UnsendableMail(ValueError):
    """A message that no retry can send: it cannot be built (a line break in a header), or
    the server refused it for good (5xx for its recipients or its content)."""


def build_message(
    *, sender: str, recipients: Sequence[str], subject: str, body: str
) -> EmailMessage:
    try:
        message = EmailMessage()
        message["From"] = sender
        message["To"] = ", ".join(recipients)
        message["Subject"] = subject
        message.set_content(body)
    except ValueError as exc:  # the email package refuses CR/LF in headers, and other forms
        raise UnsendableMail(f"the message cannot be built: {exc}") from exc
    return message


def is_permanent(error: BaseException) -> bool:
    """Whether retrying cannot help. Server trouble, timeouts, refused connections and
    authentication or sender problems (an operator can fix those) are worth retrying."""
    if isinstance(error, UnsendableMail):
        return True
    if isinstance(error, aiosmtplib.SMTPRecipientsRefused):
        return bool(error.recipients) and all(r.code >= 500 for r in error.recipients)
    if isinstance(error, aiosmtplib.SMTPRecipientRefused | aiosmtplib.SMTPDataError):
        return error.code >= 500
    return False


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
    message = build_message(sender=sender, recipients=recipients, subject=subject, body=body)
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
