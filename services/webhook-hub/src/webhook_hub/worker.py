"""`webhook-hub worker`: the outbox relay and the service's background loops."""

from servicekit.worker import run_worker

from webhook_hub.events import registry
from webhook_hub.settings import Settings


async def run(settings: Settings) -> None:
    await run_worker(settings, source="webhook-hub", registry=registry)
