"""`commerce-content worker`: the outbox relay and the service's background loops."""

from servicekit.worker import run_worker

from commerce_content.events import registry
from commerce_content.settings import Settings


async def run(settings: Settings) -> None:
    await run_worker(settings, source="commerce-content", registry=registry)
