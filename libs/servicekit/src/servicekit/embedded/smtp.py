"""SMTP servers on loopback (aiosmtpd): a sink that files mail for `make run`, and a recorder
that keeps it in memory for tests."""

from __future__ import annotations

import email
import email.policy
import time
import uuid
from dataclasses import dataclass
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller

from servicekit.embedded.network import free_port


@dataclass(frozen=True)
class ReceivedMail:
    sender: str
    recipients: tuple[str, ...]
    message: EmailMessage

    @property
    def subject(self) -> str:
        return str(self.message["Subject"] or "")

    @property
    def text(self) -> str:
        body = self.message.get_body(preferencelist=("plain", "html"))
        return "" if body is None else str(body.get_content())


class _Handler:
    def __init__(self, directory: Path | None) -> None:
        self.directory = directory
        self.received: list[ReceivedMail] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        raw: bytes = envelope.original_content or envelope.content
        message = email.message_from_bytes(raw, policy=email.policy.default)
        assert isinstance(message, EmailMessage)
        self.received.append(ReceivedMail(envelope.mail_from, tuple(envelope.rcpt_tos), message))
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
            name = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}.eml"
            (self.directory / name).write_bytes(raw)
        return "250 Message accepted for delivery"


class SmtpServer:
    """Runs in a background thread; `directory` set means every message is also filed there."""

    def __init__(
        self, *, host: str = "127.0.0.1", port: int | None = None, directory: Path | None = None
    ) -> None:
        self.host = host
        self.port = port or free_port(host)
        self._handler = _Handler(directory)
        self._controller = Controller(self._handler, hostname=host, port=self.port)

    @property
    def url(self) -> str:
        return f"smtp://{self.host}:{self.port}"

    @property
    def received(self) -> list[ReceivedMail]:
        return self._handler.received

    def wait_for(self, count: int, timeout: float = 10.0) -> list[ReceivedMail]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(self.received) >= count:
                return list(self.received)
            time.sleep(0.05)
        raise TimeoutError(f"expected {count} messages, got {len(self.received)}")

    def start(self) -> None:
        self._controller.start()

    def stop(self) -> None:
        self._controller.stop()
