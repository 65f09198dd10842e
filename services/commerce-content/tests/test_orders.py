"""Checkout with Decimal totals, Stripe-scheme notifications, the sandbox payment flow."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import httpx
import pytest
from commerce_content.app import create_app
from commerce_content.payments.provider import payment_provider
from commerce_content.settings import Settings
from pydantic import SecretStr
from servicekit.settings import Environment
from servicekit.signing import sign_stripe
from servicekit.testing import run_http_server, serve_app
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.factories import make_product

WEBHOOK = "/api/orders/webhook/stripe"


def secret_of(settings: Settings) -> str:
    return settings.payment_webhook_secret.get_secret_value()


async def checkout(client: httpx.AsyncClient, **body: Any) -> httpx.Response:
    return await client.post("/api/orders/checkout", json=body)


async def order_row(engine: AsyncEngine, order_id: str) -> Any:
    async with engine.connect() as conn:
        return (
            await conn.execute(text("SELECT * FROM orders WHERE id = :id"), {"id": order_id})
        ).one()


def completed_event(
    order: Any,
    event_id: str | None = None,
    event_type: str = "checkout.session.completed",
    **session: Any,
) -> bytes:
    """A provider notification that matches `order`'s payment session unless `session` says
    otherwise."""
    checkout_session: dict[str, Any] = {
        "id": order.payment_session_id,
        "object": "checkout.session",
        "payment_intent": "pi_123",
        "payment_status": "paid",
        "amount_total": int(order.total * 100),
        "currency": order.currency.lower(),
        "metadata": {"order_id": str(order.id)},
    }
    checkout_session.update(session)
    return json.dumps(
        {
            "id": event_id or f"evt_{uuid.uuid4().hex}",
            "type": event_type,
            "data": {"object": checkout_session},
        }
    ).encode()


async def notify(
    client: httpx.AsyncClient, settings: Settings, payload: bytes, timestamp: int | None = None
) -> httpx.Response:
    signature = sign_stripe(payload, secret_of(settings), timestamp=timestamp)
    return await client.post(WEBHOOK, content=payload, headers={"Stripe-Signature": signature})


async def pending_order(
    client: httpx.AsyncClient, engine: AsyncEngine, quantity: int = 1, price: str = "19.99"
) -> Any:
    product = await make_product(engine, price=price, stock=10)
    response = await checkout(client, items=[{"productId": str(product), "quantity": quantity}])
    assert response.status_code == 200, response.text
    return await order_row(engine, response.json()["orderId"])


async def test_checkout_prices_from_the_products_and_totals_in_decimal(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    mug = await make_product(db_engine, price="19.99")
    shirt = await make_product(db_engine, price="25.00", sale_price="12.345")
    response = await checkout(
        client,
        items=[{"productId": str(mug), "quantity": 3}, {"productId": str(shirt), "quantity": 2}],
        customerEmail="ada@example.com",
        shippingAddress={
            "name": "Ada",
            "line1": "1 Main St",
            "city": "Oslo",
            "postal_code": "0150",
            "country": "NO",
        },
    )
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"orderId", "paymentUrl"}
    order = await order_row(db_engine, body["orderId"])
    assert order.status == "pending"
    assert str(order.total) == "84.67"  # 3 x 19.99 + 2 x 12.35 (the sale price, stored to cents)
    assert order.currency == "USD"
    assert body["paymentUrl"].endswith(f"/api/orders/sandbox/{order.payment_session_id}")
    async with db_engine.connect() as conn:
        items = (
            await conn.execute(
                text(
                    "SELECT name, price, quantity FROM order_items WHERE order_id = :id ORDER BY id"
                ),
                {"id": body["orderId"]},
            )
        ).all()
        event = await conn.scalar(
            text("SELECT type FROM outbox_events WHERE data->>'id' = :id"), {"id": body["orderId"]}
        )
    assert [(str(i.price), i.quantity) for i in items] == [("19.99", 3), ("12.35", 2)]
    assert event == "order.created"


def test_unit_amounts_are_price_times_100_rounded() -> None:
    from decimal import Decimal

    from commerce_content.payments.provider import LineItem

    assert LineItem("a", Decimal("19.99"), 1).unit_amount == 1999
    assert LineItem("b", Decimal("0.125"), 1).unit_amount == 13
    assert LineItem("c", Decimal("12.345"), 1).unit_amount == 1235


@pytest.mark.parametrize(
    "body",
    [{}, {"items": []}, {"items": "mug"}, {"items": [1, 2]}],
)
async def test_missing_or_empty_items_are_400(
    client: httpx.AsyncClient, body: dict[str, Any]
) -> None:
    response = await client.post("/api/orders/checkout", json=body)
    assert response.status_code == 400
    assert set(response.json()) == {"error"}


async def test_bad_lines_are_400_naming_the_item(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    good = await make_product(db_engine)
    hidden = await make_product(db_engine, published=False)
    gone = await make_product(db_engine, deleted=True)
    scarce = await make_product(db_engine, stock=1)
    cases = [
        ({"productId": "999999", "quantity": 1}, "not available"),
        ({"productId": str(hidden), "quantity": 1}, "not available"),
        ({"productId": str(gone), "quantity": 1}, "not available"),
        ({"productId": str(scarce), "quantity": 2}, "in stock"),
        ({"productId": str(good), "quantity": 0}, "quantity"),
        ({"productId": str(good), "quantity": 1.5}, "quantity"),
        ({"productId": str(good), "quantity": "2"}, "quantity"),
        ({"productId": int(good), "quantity": 1}, "productId"),
    ]
    for line, words in cases:
        response = await checkout(client, items=[{"productId": str(good), "quantity": 1}, line])
        assert response.status_code == 400, line
        assert "items[1]" in response.json()["error"], line
        assert words in response.json()["error"], line


async def test_an_invalid_shipping_address_is_400(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    product = await make_product(db_engine)
    response = await checkout(
        client,
        items=[{"productId": str(product), "quantity": 1}],
        shippingAddress={"name": "Ada", "country": "Norway"},
    )
    assert response.status_code == 400
    assert "shippingAddress" in response.json()["error"]


CAMEL_ADDRESS = {
    "name": "A",
    "line1": "1 Test Street",
    "city": "Springfield",
    "postalCode": "12345",
    "country": "US",
}


async def test_a_camel_case_shipping_address_is_accepted_like_the_rest_of_the_body(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    product = await make_product(db_engine)
    response = await checkout(
        client, items=[{"productId": str(product), "quantity": 1}], shippingAddress=CAMEL_ADDRESS
    )
    assert response.status_code == 200, response.text
    order = await order_row(db_engine, response.json()["orderId"])
    assert order.shipping_address == {
        "name": "A",
        "line1": "1 Test Street",
        "city": "Springfield",
        "postal_code": "12345",
        "country": "US",
    }


@pytest.mark.parametrize(("field", "value"), [("postalCode", ""), ("postal_code", "")])
async def test_an_address_error_names_the_field_as_the_client_spelled_it(
    client: httpx.AsyncClient, db_engine: AsyncEngine, field: str, value: str
) -> None:
    product = await make_product(db_engine)
    address = {**{k: v for k, v in CAMEL_ADDRESS.items() if k != "postalCode"}, field: value}
    response = await checkout(
        client, items=[{"productId": str(product), "quantity": 1}], shippingAddress=address
    )
    assert response.status_code == 400
    assert response.json() == {"error": f"INVALID_ADDRESS: shippingAddress is invalid: {field}"}


async def test_a_missing_address_field_is_named_in_camel_case(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    product = await make_product(db_engine)
    address = {k: v for k, v in CAMEL_ADDRESS.items() if k != "postalCode"}
    response = await checkout(
        client, items=[{"productId": str(product), "quantity": 1}], shippingAddress=address
    )
    assert response.json() == {"error": "INVALID_ADDRESS: shippingAddress is invalid: postalCode"}


async def test_a_signed_completion_marks_the_order_paid_once(
    client: httpx.AsyncClient, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    product = await make_product(db_engine, stock=5)
    order_id = (await checkout(client, items=[{"productId": str(product), "quantity": 2}])).json()[
        "orderId"
    ]
    payload = completed_event(
        await order_row(db_engine, order_id), event_id="evt_duplicate_" + uuid.uuid4().hex
    )
    for _ in range(4):
        response = await client.post(
            WEBHOOK,
            content=payload,
            headers={"Stripe-Signature": sign_stripe(payload, secret_of(service_settings))},
        )
        assert response.status_code == 200
        assert response.json() == {"received": True}
    order = await order_row(db_engine, order_id)
    assert order.status == "paid"
    assert order.payment_id == "pi_123"
    async with db_engine.connect() as conn:
        paid_events = await conn.scalar(
            text(
                "SELECT count(*) FROM outbox_events WHERE type = 'order.paid' AND data->>'id' = :id"
            ),
            {"id": order_id},
        )
        stock = await conn.scalar(
            text("SELECT stock FROM products WHERE id = :id"), {"id": product}
        )
    assert paid_events == 1
    assert stock == 3


@pytest.mark.parametrize("problem", ["tampered", "stale", "missing", "wrong secret"])
async def test_bad_signatures_are_400_and_change_nothing(
    client: httpx.AsyncClient, db_engine: AsyncEngine, service_settings: Settings, problem: str
) -> None:
    product = await make_product(db_engine)
    order_id = (await checkout(client, items=[{"productId": str(product), "quantity": 1}])).json()[
        "orderId"
    ]
    payload = completed_event(await order_row(db_engine, order_id))
    secret = secret_of(service_settings)
    headers = {
        "tampered": {
            "Stripe-Signature": sign_stripe(payload.replace(b"pi_123", b"pi_999"), secret)
        },
        "stale": {
            "Stripe-Signature": sign_stripe(payload, secret, timestamp=int(time.time()) - 301)
        },
        "missing": {},
        "wrong secret": {"Stripe-Signature": sign_stripe(payload, "whsec_not_ours")},
    }[problem]
    response = await client.post(WEBHOOK, content=payload, headers=headers)
    assert response.status_code == 400
    assert "signature" in response.json()["error"].lower()
    assert (await order_row(db_engine, order_id)).status == "pending"


async def test_other_event_types_are_acknowledged_and_change_nothing(
    client: httpx.AsyncClient, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    product = await make_product(db_engine)
    order_id = (await checkout(client, items=[{"productId": str(product), "quantity": 1}])).json()[
        "orderId"
    ]
    payload = json.dumps(
        {
            "id": f"evt_{uuid.uuid4().hex}",
            "type": "payment_intent.created",
            "data": {"object": {"metadata": {"order_id": order_id}}},
        }
    ).encode()
    response = await client.post(
        WEBHOOK,
        content=payload,
        headers={"Stripe-Signature": sign_stripe(payload, secret_of(service_settings))},
    )
    assert response.json() == {"received": True}
    assert (await order_row(db_engine, order_id)).status == "pending"


async def test_an_unknown_provider_is_404(client: httpx.AsyncClient) -> None:
    response = await client.post("/api/orders/webhook/paypal", content=b"{}")
    assert response.status_code == 404


async def test_the_sandbox_flow_pays_through_the_signed_webhook(
    service_settings: Settings, db_engine: AsyncEngine
) -> None:
    from servicekit.embedded.network import free_port

    port = free_port()
    settings = service_settings.model_copy(update={"public_base_url": f"http://127.0.0.1:{port}"})
    product = await make_product(db_engine, price="5.00")
    async with (
        run_http_server(create_app(settings), port) as base,
        httpx.AsyncClient(base_url=base) as http,
    ):
        created = (
            await http.post(
                "/api/orders/checkout", json={"items": [{"productId": str(product), "quantity": 2}]}
            )
        ).json()
        page = await http.get(created["paymentUrl"])
        assert page.status_code == 200
        assert "Pay" in page.text
        assert "10.00" in page.text
        paid = await http.post(created["paymentUrl"] + "/pay")
        assert paid.status_code == 303
        assert paid.headers["location"].endswith(f"/checkout/success?order={created['orderId']}")
    order = await order_row(db_engine, created["orderId"])
    assert order.status == "paid"
    assert order.payment_id.startswith("pi_sandbox_")


async def test_the_sandbox_declines_plus_decline_addresses(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    product = await make_product(db_engine)
    response = await checkout(
        client,
        items=[{"productId": str(product), "quantity": 1}],
        customerEmail="ada+decline@example.com",
    )
    assert response.status_code == 400
    assert "declines" in response.json()["error"]


async def test_the_sandbox_payment_page_does_not_exist_in_production(
    client: httpx.AsyncClient, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    order = await pending_order(client, db_engine)
    production = service_settings.model_copy(
        update={
            "env": Environment.PRODUCTION,
            "payment_provider": "stripe",
            "stripe_api_key": SecretStr("sk_live_example_value_123"),
        }
    )
    async with serve_app(create_app(production)) as http:
        page = await http.get(f"/api/orders/sandbox/{order.payment_session_id}")
        paid = await http.post(f"/api/orders/sandbox/{order.payment_session_id}/pay")
    assert page.status_code == 404
    assert paid.status_code == 404
    assert (await order_row(db_engine, str(order.id))).status == "pending"


def test_the_sandbox_provider_refuses_to_run_in_production(service_settings: Settings) -> None:
    production = service_settings.model_copy(
        update={"env": Environment.PRODUCTION, "payment_provider": "sandbox"}
    )
    with pytest.raises(ValueError, match="sandbox"):
        payment_provider(production)


async def test_a_notification_without_a_checkout_session_object_is_400(
    client: httpx.AsyncClient, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    payload = json.dumps(
        {
            "id": f"evt_{uuid.uuid4().hex}",
            "type": "checkout.session.completed",
            "data": {"object": None},
        }
    ).encode()
    response = await notify(client, service_settings, payload)
    assert response.status_code == 400
    assert "data.object" in response.json()["error"]


async def test_a_signature_from_10_days_in_the_future_is_400(
    client: httpx.AsyncClient, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    order = await pending_order(client, db_engine)
    payload = completed_event(order)
    response = await notify(
        client, service_settings, payload, timestamp=int(time.time()) + 10 * 86400
    )
    assert response.status_code == 400
    assert "signature" in response.json()["error"].lower()
    assert (await order_row(db_engine, str(order.id))).status == "pending"


async def test_a_completion_for_another_amount_is_400_and_leaves_the_order_pending(
    client: httpx.AsyncClient, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    order = await pending_order(client, db_engine)
    response = await notify(client, service_settings, completed_event(order, amount_total=1))
    assert response.status_code == 400
    assert "amount" in response.json()["error"]
    assert (await order_row(db_engine, str(order.id))).status == "pending"


async def test_a_completion_in_another_currency_is_400_and_leaves_the_order_pending(
    client: httpx.AsyncClient, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    order = await pending_order(client, db_engine)
    response = await notify(client, service_settings, completed_event(order, currency="eur"))
    assert response.status_code == 400
    assert "currency" in response.json()["error"]
    assert (await order_row(db_engine, str(order.id))).status == "pending"


async def test_a_completion_naming_another_session_is_400_and_leaves_the_order_pending(
    client: httpx.AsyncClient, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    order = await pending_order(client, db_engine)
    other = await pending_order(client, db_engine)
    payload = completed_event(order, id=other.payment_session_id)
    response = await notify(client, service_settings, payload)
    assert response.status_code == 400
    assert "session" in response.json()["error"]
    assert (await order_row(db_engine, str(order.id))).status == "pending"
    assert (await order_row(db_engine, str(other.id))).status == "pending"


async def test_a_completion_still_unpaid_is_acknowledged_and_leaves_the_order_pending(
    client: httpx.AsyncClient, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    order = await pending_order(client, db_engine)
    payload = completed_event(order, payment_status="unpaid")
    response = await notify(client, service_settings, payload)
    assert response.status_code == 200
    assert (await order_row(db_engine, str(order.id))).status == "pending"


async def test_a_delayed_payment_that_succeeds_later_pays_the_order(
    client: httpx.AsyncClient, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    order = await pending_order(client, db_engine)
    await notify(client, service_settings, completed_event(order, payment_status="unpaid"))
    succeeded = completed_event(order, event_type="checkout.session.async_payment_succeeded")
    response = await notify(client, service_settings, succeeded)
    assert response.status_code == 200
    assert (await order_row(db_engine, str(order.id))).status == "paid"


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ({"productId": "99999999999999999999", "quantity": 1}, "not available"),
        ({"productId": "2147483648", "quantity": 1}, "not available"),
        ({"productId": "\u00b2", "quantity": 1}, "productId"),
        ({"productId": "\u0661\u0662", "quantity": 1}, "productId"),
        ({"productId": "1", "quantity": 10**20}, "quantity"),
    ],
)
async def test_out_of_range_ids_and_quantities_are_400_naming_the_item(
    client: httpx.AsyncClient, db_engine: AsyncEngine, line: dict[str, Any], words: str
) -> None:
    good = await make_product(db_engine)
    if line["productId"] == "1":
        line = {**line, "productId": str(good)}
    response = await checkout(client, items=[{"productId": str(good), "quantity": 1}, line])
    assert response.status_code == 400, response.text
    assert "items[1]" in response.json()["error"]
    assert words in response.json()["error"]


@pytest.mark.parametrize(
    "extra",
    [
        {"customerEmail": "ada\u0000@example.com"},
        {"customerEmail": "ada@example.com\r\nBcc: x@example.com"},
        {
            "shippingAddress": {
                "name": "Ada\u0000",
                "line1": "1 Main St",
                "city": "Oslo",
                "postal_code": "0150",
                "country": "NO",
            }
        },
    ],
)
async def test_control_characters_in_the_email_or_address_are_400(
    client: httpx.AsyncClient, db_engine: AsyncEngine, extra: dict[str, Any]
) -> None:
    product = await make_product(db_engine)
    response = await checkout(client, items=[{"productId": str(product), "quantity": 1}], **extra)
    assert response.status_code == 400
    assert set(response.json()) == {"error"}
