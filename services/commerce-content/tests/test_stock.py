"""Stock is reserved at checkout, given back when an unpaid order expires, never below zero."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from commerce_content.app import create_app
from commerce_content.settings import Settings
from commerce_content.worker import run as run_worker
from servicekit.signing import sign_stripe
from servicekit.testing import run_http_server
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlmodel.ext.asyncio.session import AsyncSession

from tests.factories import make_product

WEBHOOK = "/api/orders/webhook/stripe"


async def stock_of(engine: AsyncEngine, product_id: int) -> int:
    async with engine.connect() as conn:
        stock = await conn.scalar(
            text("SELECT stock FROM products WHERE id = :id"), {"id": product_id}
        )
    return int(stock)


async def order_row(engine: AsyncEngine, order_id: str) -> Any:
    async with engine.connect() as conn:
        return (
            await conn.execute(text("SELECT * FROM orders WHERE id = :id"), {"id": order_id})
        ).one()


async def buy(http: httpx.AsyncClient, product_id: int, quantity: int) -> httpx.Response:
    return await http.post(
        "/api/orders/checkout",
        json={"items": [{"productId": str(product_id), "quantity": quantity}]},
    )


async def pay(http: httpx.AsyncClient, settings: Settings, order: Any, **overrides: Any) -> Any:
    checkout_session = {
        "id": order.payment_session_id,
        "payment_intent": f"pi_{uuid.uuid4().hex[:8]}",
        "payment_status": "paid",
        "amount_total": int(order.total * 100),
        "currency": order.currency.lower(),
        "metadata": {"order_id": str(order.id)},
    }
    payload = json.dumps(
        {
            "id": f"evt_{uuid.uuid4().hex}",
            "type": overrides.pop("type", "checkout.session.completed"),
            "data": {"object": {**checkout_session, **overrides}},
        }
    ).encode()
    secret = settings.payment_webhook_secret.get_secret_value()
    return await http.post(
        WEBHOOK, content=payload, headers={"Stripe-Signature": sign_stripe(payload, secret)}
    )


async def expire_now(engine: AsyncEngine, order_id: str) -> None:
    """The order's reservation ran out long ago."""
    async with engine.begin() as conn:
        await conn.execute(
            text("UPDATE orders SET expires_at = now() - interval '1 day' WHERE id = :id"),
            {"id": order_id},
        )


async def run_expiry(engine: AsyncEngine, grace_seconds: float = 0.0) -> int:
    from commerce_content.orders.stock import expire_due_orders

    async with AsyncSession(engine) as session, session.begin():
        return await expire_due_orders(session, datetime.now(UTC), grace_seconds)


async def bought(
    client: httpx.AsyncClient, engine: AsyncEngine, stock: int, quantity: int
) -> tuple[int, Any]:
    """A product with `stock` in stock and the row of an order of `quantity` of it."""
    product = await make_product(engine, stock=stock)
    return product, await order_row(
        engine, (await buy(client, product, quantity)).json()["orderId"]
    )


async def expired_by_the_sweep(engine: AsyncEngine, order_id: str) -> None:
    """The order's reservation ran out long ago, and the expiry sweep has run."""
    await expire_now(engine, order_id)
    await run_expiry(engine)


async def test_of_parallel_checkouts_for_the_last_items_one_wins_and_the_others_are_told(
    service_settings: Settings, db_engine: AsyncEngine
) -> None:
    product = await make_product(db_engine, stock=2)
    async with (
        run_http_server(create_app(service_settings)) as base,
        httpx.AsyncClient(base_url=base, timeout=30) as http,
    ):
        answers = await asyncio.gather(*(buy(http, product, 2) for _ in range(6)))
    statuses = sorted(a.status_code for a in answers)
    assert statuses == [200, 400, 400, 400, 400, 400]
    for refused in (a for a in answers if a.status_code == 400):
        assert refused.json()["error"].startswith("INSUFFICIENT_STOCK: items[0]")
    assert await stock_of(db_engine, product) == 0


async def test_the_second_buyer_of_the_last_items_is_told_at_checkout_and_stock_stays_zero(
    client: httpx.AsyncClient, service_settings: Settings, db_engine: AsyncEngine
) -> None:
    product = await make_product(db_engine, stock=2)
    first = await buy(client, product, 2)
    second = await buy(client, product, 2)
    assert first.status_code == 200
    assert second.status_code == 400
    assert "INSUFFICIENT_STOCK" in second.json()["error"]
    order = await order_row(db_engine, first.json()["orderId"])
    assert (await pay(client, service_settings, order)).status_code == 200
    assert await stock_of(db_engine, product) == 0


async def test_checkout_reserves_the_stock_and_payment_keeps_it(
    client: httpx.AsyncClient, service_settings: Settings, db_engine: AsyncEngine
) -> None:
    product = await make_product(db_engine, stock=5)
    order_id = (await buy(client, product, 2)).json()["orderId"]
    assert await stock_of(db_engine, product) == 3
    order = await order_row(db_engine, order_id)
    held = timedelta(minutes=service_settings.checkout_expiry_minutes)
    assert order.expires_at - order.stock_reserved_at == held
    await pay(client, service_settings, order)
    assert (await order_row(db_engine, order_id)).status == "paid"
    assert await stock_of(db_engine, product) == 3


async def test_an_unpaid_order_expires_and_gives_its_stock_back(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    product = await make_product(db_engine, stock=5)
    order_id = (await buy(client, product, 2)).json()["orderId"]
    await expire_now(db_engine, order_id)
    assert await run_expiry(db_engine) >= 1
    assert (await order_row(db_engine, order_id)).status == "expired"
    assert await stock_of(db_engine, product) == 5
    assert await run_expiry(db_engine) == 0  # given back once


async def expired_events(engine: AsyncEngine, order_id: str) -> list[dict[str, Any]]:
    async with engine.connect() as conn:
        rows = await conn.execute(
            text(
                "SELECT data FROM outbox_events WHERE type = 'order.expired' AND data->>'id' = :id"
            ),
            {"id": order_id},
        )
        return [row.data for row in rows]


async def test_an_order_that_expires_unpaid_publishes_order_expired_once(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    product = await make_product(db_engine, stock=5)
    order_id = (await buy(client, product, 2)).json()["orderId"]
    await expire_now(db_engine, order_id)
    await run_expiry(db_engine)
    await run_expiry(db_engine)
    events = await expired_events(db_engine, order_id)
    assert [(e["id"], e["status"]) for e in events] == [(order_id, "expired")]


async def test_the_providers_expiry_notice_publishes_order_expired(
    client: httpx.AsyncClient, service_settings: Settings, db_engine: AsyncEngine
) -> None:
    _, order = await bought(client, db_engine, 5, 2)
    await pay(
        client,
        service_settings,
        order,
        type="checkout.session.expired",
        payment_status="unpaid",
        amount_total=None,
    )
    events = await expired_events(db_engine, str(order.id))
    assert [e["status"] for e in events] == ["expired"]


async def test_an_order_still_in_its_grace_period_publishes_nothing(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    product = await make_product(db_engine, stock=5)
    order_id = (await buy(client, product, 2)).json()["orderId"]
    await run_expiry(db_engine, grace_seconds=600)
    assert await expired_events(db_engine, order_id) == []


async def test_the_worker_expires_unpaid_orders(
    service_settings: Settings, client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    product = await make_product(db_engine, stock=5)
    order_id = (await buy(client, product, 2)).json()["orderId"]
    await expire_now(db_engine, order_id)
    stop = asyncio.Event()
    worker = asyncio.create_task(run_worker(service_settings, stop))
    try:
        for _ in range(200):
            if (await order_row(db_engine, order_id)).status == "expired":
                break
            await asyncio.sleep(0.1)
    finally:
        stop.set()
        await asyncio.wait_for(worker, 30)
    assert (await order_row(db_engine, order_id)).status == "expired"
    assert await stock_of(db_engine, product) == 5


async def test_a_reservation_is_kept_through_the_grace_period_after_expiry(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    product = await make_product(db_engine, stock=5)
    order_id = (await buy(client, product, 2)).json()["orderId"]
    async with db_engine.begin() as conn:
        await conn.execute(
            text("UPDATE orders SET expires_at = now() - interval '1 minute' WHERE id = :id"),
            {"id": order_id},
        )
    await run_expiry(db_engine, grace_seconds=600)
    assert (await order_row(db_engine, order_id)).status == "pending"
    assert await stock_of(db_engine, product) == 3


async def test_the_providers_expiry_notice_gives_the_stock_back(
    client: httpx.AsyncClient, service_settings: Settings, db_engine: AsyncEngine
) -> None:
    product, order = await bought(client, db_engine, 5, 2)
    response = await pay(
        client,
        service_settings,
        order,
        type="checkout.session.expired",
        payment_status="unpaid",
        amount_total=None,
    )
    assert response.status_code == 200
    assert (await order_row(db_engine, str(order.id))).status == "expired"
    assert await stock_of(db_engine, product) == 5


async def test_a_late_payment_for_an_expired_order_takes_the_stock_still_there(
    client: httpx.AsyncClient, service_settings: Settings, db_engine: AsyncEngine
) -> None:
    product, order = await bought(client, db_engine, 5, 2)
    await expired_by_the_sweep(db_engine, str(order.id))
    assert (await pay(client, service_settings, order)).status_code == 200
    assert (await order_row(db_engine, str(order.id))).status == "paid"
    assert await stock_of(db_engine, product) == 3


async def test_a_late_payment_for_stock_sold_meanwhile_is_kept_for_refund_and_never_oversells(
    client: httpx.AsyncClient, service_settings: Settings, db_engine: AsyncEngine
) -> None:
    product, late = await bought(client, db_engine, 2, 2)
    await expired_by_the_sweep(db_engine, str(late.id))
    assert (await buy(client, product, 2)).status_code == 200  # someone else took it
    response = await pay(client, service_settings, late)
    assert response.status_code == 200  # a retry would not help
    row = await order_row(db_engine, str(late.id))
    assert row.status == "expired"
    assert row.payment_id  # the payment to refund
    assert await stock_of(db_engine, product) == 0


async def test_a_notification_with_an_unusable_event_id_is_400(
    client: httpx.AsyncClient, service_settings: Settings
) -> None:
    secret = service_settings.payment_webhook_secret.get_secret_value()
    for event_id in ("evt_\u0000", "e" * 256):
        payload = json.dumps(
            {"id": event_id, "type": "checkout.session.completed", "data": {"object": {}}}
        ).encode()
        response = await client.post(
            WEBHOOK, content=payload, headers={"Stripe-Signature": sign_stripe(payload, secret)}
        )
        assert response.status_code == 400


async def test_the_sandbox_refuses_to_pay_an_expired_session(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    product = await make_product(db_engine, stock=5)
    created = (await buy(client, product, 1)).json()
    await expire_now(db_engine, created["orderId"])
    page = await client.get(created["paymentUrl"])
    assert "expired" in page.text
    paid = await client.post(created["paymentUrl"] + "/pay")
    assert paid.status_code == 409
    assert (await order_row(db_engine, created["orderId"])).status == "pending"
