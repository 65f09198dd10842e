"""`commerce-content worker`: the outbox relay, mail and its retention, the expiry of
unpaid orders and the pruning of checkout idempotency keys and of unused persisted
queries."""

import asyncio

from servicekit.mail_outbox import mail_loop
from servicekit.retention import mail_retention_loop
from servicekit.worker import run_worker

from commerce_content.events import registry
from commerce_content.graphql_api.persisted import persisted_query_retention_loop
from commerce_content.orders.idempotency import idempotency_retention_loop
from commerce_content.orders.stock import order_expiry_loop
from commerce_content.settings import Settings


async def run(settings: Settings, stop: asyncio.Event | None = None) -> None:
    loops = [
        mail_loop(settings),
        mail_retention_loop(settings),
        order_expiry_loop(settings),
        idempotency_retention_loop(settings),
    ]
    if (persisted := persisted_query_retention_loop(settings)) is not None:
        loops.append(persisted)
    await run_worker(settings, source="commerce-content", registry=registry, loops=loops, stop=stop)
