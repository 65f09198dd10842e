"""`commerce-content worker`: the outbox relay and the service's background loops."""

import asyncio

from servicekit.mail_outbox import mail_loop
from servicekit.worker import run_worker

from commerce_content.events import registry
from commerce_content.settings import Settings


async def run(settings: Settings, stop: asyncio.Event | None = None) -> None:
    await run_worker(
        settings,
        source="commerce-content",
        registry=registry,
        loops=[mail_loop(settings)],
        stop=stop,
    )
