"""`scraper-manager worker`: the outbox relay and the service's background loops."""

from servicekit.worker import run_worker

from scraper_manager.events import registry
from scraper_manager.settings import Settings


async def run(settings: Settings) -> None:
    await run_worker(settings, source="scraper-manager", registry=registry)
