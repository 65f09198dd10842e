"""`commerce-content worker`: the outbox relay, mail and its retention, the expiry of
unpaid orders and the pruning of checkout idempotency keys."""

import asyncio

from servicekit.mail_outbox import mail_loop
from servicekit.retention import mail_retention_loop
from servicekit.worker import run_worker

from commerce_content.events import registry
from commerce_content.orders.idempotency import idempotency_retention_loop
from commerce_content.orders.stock import order_expiry_loop
from commerce_content.settings import Settings


async def run(settings: Settings, stop: asyncio.Event | None = None) -> None:
    await run_worker(
        settings,
        source="commerce-content",
        registry=registry,
        loops=[
            mail_loop(settings),
            mail_retention_loop(settings),
            order_expiry_loop(settings),
            idempotency_retention_loop(settings),
        ],
        stop=stop,
    )
