"""GraphQL subscriptions over a real WebSocket (uvicorn on loopback) with the
graphql-transport-ws protocol, fed by the service's events on the embedded NATS."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from commerce_content.app import create_app
from commerce_content.graphql_api.adapter import MalformedMessage
from commerce_content.graphql_api.ids import GlobalId
from commerce_content.graphql_api.live import (
    ConnectionCaps,
    ConnectionCounts,
    ContentEvent,
    OrderEvent,
    parse_event,
)
from commerce_content.graphql_api.websocket import bearer_token, parse_message
from commerce_content.settings import Settings
from servicekit.embedded.network import free_port
from servicekit.events.relay import OutboxRelay
from servicekit.testing import run_http_server
from sqlalchemy.ext.asyncio import AsyncEngine
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from tests.factories import bearer_for, make_product, make_user
from tests.graphql_client import ask
from tests.test_graphql_orders import create_order
from tests.test_stock import expire_now, run_expiry

PROTOCOL = "graphql-transport-ws"
ORDER_STATUS = "subscription($id: ID!) { orderStatusChanged(orderId: $id) { id status paidAt } }"
STOCK = "subscription($ids: [ID!]) { stockChanged(productIds: $ids) { productId stock inStock } }"


@asynccontextmanager
async def running(settings: Settings, **update: Any) -> AsyncIterator[tuple[str, Any]]:
    """The app behind uvicorn, once its broker follows NATS; its base URL and the app."""
    port = free_port()
    settings = settings.model_copy(update={"public_base_url": f"http://127.0.0.1:{port}", **update})
    app = create_app(settings)
    async with run_http_server(app, port) as base:
        broker = app.state.graphql_subscriptions.broker
        await broker.following.wait()
        yield base, app


@asynccontextmanager
async def socket(base: str, protocol: str = PROTOCOL) -> AsyncIterator[ClientConnection]:
    async with connect(
        base.replace("http://", "ws://") + "/graphql",
        subprotocols=[protocol],  # type: ignore[list-item]
    ) as ws:
        yield ws


async def opened(base: str) -> ClientConnection:
    """A socket of the protocol, left open (the caller or the server closes it)."""
    return await connect(
        base.replace("http://", "ws://") + "/graphql",
        subprotocols=[PROTOCOL],  # type: ignore[list-item]
    )


async def receive(ws: ClientConnection) -> dict[str, Any]:
    """The next message that is not the server's heartbeat."""
    while True:
        message = json.loads(await ws.recv())
        if message["type"] != "ping":
            return dict(message)


async def closed_with(ws: ClientConnection) -> tuple[int, str]:
    """How the server closed the socket (messages before the close are skipped)."""
    try:
        while True:
            await ws.recv()
    except ConnectionClosed:
        pass
    assert ws.close_code is not None
    return ws.close_code, ws.close_reason or ""


async def initialised(ws: ClientConnection, headers: dict[str, str]) -> None:
    await ws.send(json.dumps({"type": "connection_init", "payload": headers}))
    assert await receive(ws) == {"type": "connection_ack"}


async def subscribe(
    ws: ClientConnection, query: str, variables: dict[str, Any], op: str = "1"
) -> None:
    payload = {"query": query, "variables": variables}
    await ws.send(json.dumps({"id": op, "type": "subscribe", "payload": payload}))


@asynccontextmanager
async def watching(
    base: str, headers: dict[str, str], query: str, variables: dict[str, Any]
) -> AsyncIterator[tuple[ClientConnection, dict[str, Any]]]:
    """A socket initialised with `headers` and subscribed to `query`: it and the first answer."""
    async with socket(base) as ws:
        await initialised(ws, headers)
        await subscribe(ws, query, variables)
        yield ws, await receive(ws)


async def first_answer(
    base: str, headers: dict[str, str], query: str, variables: dict[str, Any]
) -> dict[str, Any]:
    """The first answer to a subscription to `query` on a socket initialised with `headers`."""
    async with watching(base, headers, query, variables) as (_, first):
        return first


async def relay_events(settings: Settings, engine: AsyncEngine) -> None:
    """What the worker's relay does: the outbox's events onto NATS."""
    import nats

    client = await nats.connect(settings.nats_url)
    try:
        relay = OutboxRelay(
            engine,
            client.jetstream(),
            source="commerce-content",
            database_url=settings.database_url,
        )
        while await relay.publish_pending():
            pass
    finally:
        await client.close()


async def buyer_with_order(
    base: str, engine: AsyncEngine, settings: Settings
) -> tuple[dict[str, str], dict[str, Any]]:
    user_id = await make_user(engine, "user")
    headers = bearer_for(settings, user_id, "user")
    product = await make_product(engine, price="5.00", stock=10)
    created = await create_order(
        f"{base}/graphql", headers, [{"productId": _product_gid(product), "quantity": 1}]
    )
    assert created["order"] is not None, created
    return headers, created["order"]


async def test_the_buyer_sees_pending_then_paid_when_the_payment_notification_arrives(
    service_settings: Settings, db_engine: AsyncEngine
) -> None:
    async with running(service_settings) as (base, _):
        headers, order = await buyer_with_order(base, db_engine, service_settings)
        async with watching(base, headers, ORDER_STATUS, {"id": order["id"]}) as (ws, first):
            assert first["payload"]["data"]["orderStatusChanged"]["status"] == "PENDING"
            # The sandbox's Pay button: a signed checkout.session.completed to our webhook.
            async with httpx.AsyncClient() as http:
                paid = await http.post(order["paymentUrl"] + "/pay")
            assert paid.status_code == 303
            await relay_events(service_settings, db_engine)
            second = await receive(ws)
        changed = second["payload"]["data"]["orderStatusChanged"]
        assert (second["id"], second["type"]) == ("1", "next")
        assert changed["id"] == order["id"]
        assert changed["status"] == "PAID"
        assert changed["paidAt"] is not None


async def test_the_buyer_sees_expired_when_the_order_is_not_paid_in_time(
    service_settings: Settings, db_engine: AsyncEngine
) -> None:
    async with running(service_settings) as (base, _):
        headers, order = await buyer_with_order(base, db_engine, service_settings)
        async with watching(base, headers, ORDER_STATUS, {"id": order["id"]}) as (ws, first):
            assert first["payload"]["data"]["orderStatusChanged"]["status"] == "PENDING"
            order_id = GlobalId.parse(order["id"]).key
            await expire_now(db_engine, order_id)
            assert await run_expiry(db_engine) >= 1
            await relay_events(service_settings, db_engine)
            second = await receive(ws)
    changed = second["payload"]["data"]["orderStatusChanged"]
    assert (changed["id"], changed["status"]) == (order["id"], "EXPIRED")


async def test_another_users_order_is_refused_at_subscribe_time(
    service_settings: Settings, db_engine: AsyncEngine
) -> None:
    async with running(service_settings) as (base, _):
        _, order = await buyer_with_order(base, db_engine, service_settings)
        other = bearer_for(service_settings, await make_user(db_engine, "user"), "user")
        refused = await first_answer(base, other, ORDER_STATUS, {"id": order["id"]})
    assert refused["type"] == "error"
    assert refused["payload"][0]["extensions"]["code"] == "FORBIDDEN"


async def test_staff_may_watch_any_order(
    service_settings: Settings, db_engine: AsyncEngine
) -> None:
    async with running(service_settings) as (base, _):
        _, order = await buyer_with_order(base, db_engine, service_settings)
        manager = bearer_for(service_settings, await make_user(db_engine, "manager"), "manager")
        first = await first_answer(base, manager, ORDER_STATUS, {"id": order["id"]})
    assert first["payload"]["data"]["orderStatusChanged"]["status"] == "PENDING"


async def test_connection_init_without_a_token_closes_with_4403(
    service_settings: Settings,
) -> None:
    async with running(service_settings) as (base, _), socket(base) as ws:
        await ws.send(json.dumps({"type": "connection_init", "payload": {}}))
        code, reason = await closed_with(ws)
    assert code == 4403
    assert "Authorization" in reason


async def test_connection_init_with_a_wrong_token_closes_with_4403(
    service_settings: Settings,
) -> None:
    async with running(service_settings) as (base, _), socket(base) as ws:
        await ws.send(
            json.dumps({"type": "connection_init", "payload": {"Authorization": "Bearer x.y.z"}})
        )
        code, _ = await closed_with(ws)
    assert code == 4403


async def test_subscribing_before_connection_init_closes_with_4401(
    service_settings: Settings,
) -> None:
    async with running(service_settings) as (base, _), socket(base) as ws:
        await subscribe(ws, STOCK, {})
        code, _ = await closed_with(ws)
    assert code == 4401


async def test_a_user_past_the_connection_cap_is_refused_with_4429(
    service_settings: Settings, db_engine: AsyncEngine
) -> None:
    headers = bearer_for(service_settings, await make_user(db_engine, "user"), "user")
    async with (
        running(service_settings, graphql_ws_max_connections_per_user=2) as (base, _),
        socket(base) as first,
        socket(base) as second,
        socket(base) as third,
    ):
        await initialised(first, headers)
        await initialised(second, headers)
        await third.send(json.dumps({"type": "connection_init", "payload": headers}))
        code, reason = await closed_with(third)
    assert code == 4429
    assert "this user has 2 open" in reason


async def test_past_the_process_cap_a_socket_is_refused_with_1013(
    service_settings: Settings,
) -> None:
    async with (
        running(service_settings, graphql_ws_max_connections=1) as (base, _),
        socket(base),
        socket(base) as refused,
    ):
        code, reason = await closed_with(refused)
    assert code == 1013
    assert "Try again later" in reason


async def test_a_closed_connection_frees_its_place_under_the_caps(
    service_settings: Settings, db_engine: AsyncEngine
) -> None:
    headers = bearer_for(service_settings, await make_user(db_engine, "user"), "user")
    async with running(
        service_settings, graphql_ws_max_connections_per_user=1, graphql_ws_max_connections=1
    ) as (base, app):
        async with socket(base) as ws:
            await initialised(ws, headers)
        counts = app.state.graphql_subscriptions.counts
        while counts.total:  # the server sees the close after the client does
            await _tick()
        async with socket(base) as again:
            await initialised(again, headers)


async def _tick() -> None:
    import asyncio

    await asyncio.sleep(0.01)


async def test_an_admin_sees_the_stock_a_checkout_reserves(
    service_settings: Settings, db_engine: AsyncEngine
) -> None:
    admin = await make_user(db_engine, "admin")
    async with running(service_settings) as (base, _):
        product = await make_product(db_engine, price="5.00", stock=7)
        product_id = _product_gid(product)
        async with socket(base) as ws:
            await initialised(ws, bearer_for(service_settings, admin, "admin"))
            await subscribe(ws, STOCK, {"ids": [product_id]})
            buyer = bearer_for(service_settings, await make_user(db_engine, "user"), "user")
            await create_order(f"{base}/graphql", buyer, [{"productId": product_id, "quantity": 3}])
            await relay_events(service_settings, db_engine)
            change = await receive(ws)
    assert change["type"] == "next"
    assert change["payload"]["data"]["stockChanged"] == {
        "productId": product_id,
        "stock": 4,
        "inStock": True,
    }


async def test_a_buyer_may_not_subscribe_to_stock(
    service_settings: Settings, db_engine: AsyncEngine
) -> None:
    buyer = await make_user(db_engine, "user")
    async with running(service_settings) as (base, _):
        refused = await first_answer(base, bearer_for(service_settings, buyer, "user"), STOCK, {})
    assert refused["type"] == "error"
    assert refused["payload"][0]["extensions"]["code"] == "FORBIDDEN"


async def test_a_subscription_above_the_cost_limit_is_refused_before_it_subscribes(
    service_settings: Settings, db_engine: AsyncEngine
) -> None:
    admin = await make_user(db_engine, "admin")
    query = 'subscription { orderStatusChanged(orderId: "x") { id lines { name } } }'
    async with running(service_settings, graphql_max_cost=3) as (base, _):
        refused = await first_answer(base, bearer_for(service_settings, admin, "admin"), query, {})
    assert refused["type"] == "error"
    assert refused["payload"][0]["extensions"]["code"] == "MAX_COST_EXCEEDED"


async def test_queries_are_refused_over_the_websocket(
    service_settings: Settings, db_engine: AsyncEngine
) -> None:
    admin = await make_user(db_engine, "admin")
    async with running(service_settings) as (base, _):
        headers = bearer_for(service_settings, admin, "admin")
        refused = await first_answer(base, headers, "{ viewer { id } }", {})
    assert refused["type"] == "error"


async def test_the_server_sends_pings_and_answers_them(
    service_settings: Settings, db_engine: AsyncEngine
) -> None:
    admin = await make_user(db_engine, "admin")
    async with (
        running(service_settings, graphql_ws_ping_seconds=0.05) as (base, _),
        socket(base) as ws,
    ):
        await initialised(ws, bearer_for(service_settings, admin, "admin"))
        assert json.loads(await ws.recv()) == {"type": "ping"}
        await ws.send(json.dumps({"type": "ping"}))
        assert await receive(ws) == {"type": "pong"}


async def test_a_socket_without_the_subprotocol_closes_with_4406(
    service_settings: Settings,
) -> None:
    async with running(service_settings) as (base, _), socket(base, "graphql-ws") as ws:
        code, _ = await closed_with(ws)
    assert code == 4406


async def test_shutdown_closes_every_socket_with_1001(
    service_settings: Settings, db_engine: AsyncEngine
) -> None:
    headers = bearer_for(service_settings, await make_user(db_engine, "admin"), "admin")
    async with running(service_settings) as (base, _):
        first, second = await opened(base), await opened(base)
        await initialised(first, headers)
        await initialised(second, headers)
        await subscribe(first, STOCK, {})
    # The server has stopped (the block's end): both sockets were told why.
    for ws in (first, second):
        code, reason = await closed_with(ws)
        assert (code, reason) == (1001, "going away")


async def test_graphql_over_http_still_answers_with_subscriptions_in_the_schema(
    service_settings: Settings,
) -> None:
    async with running(service_settings) as (base, _):
        answer = await ask(f"{base}/graphql", '{ __type(name: "Subscription") { name } }')
    assert answer.data == {"__type": {"name": "Subscription"}}


def _product_gid(product_id: int) -> str:
    from tests.graphql_client import global_id

    return global_id("Product", product_id)


# Pure rules


def test_events_are_read_from_any_bytes() -> None:
    order = "5b1f4c9e-2d8a-4b61-9f0e-3c7d2a1b8e45"
    assert parse_event(json.dumps({"type": "order.paid", "data": {"id": order}}).encode()) == (
        OrderEvent(__import__("uuid").UUID(order), "order.paid")
    )
    assert parse_event(b'{"type": "content.updated", "data": {"id": 21}}') == ContentEvent(
        21, "content.updated"
    )
    for raw in (
        b"",
        b"\xff",
        b"[]",
        b'{"type": "order.paid", "data": {"id": "nope"}}',
        b'{"type": "content.updated", "data": {"id": true}}',
        b'{"type": "article.created", "data": {"id": 1}}',
    ):
        assert parse_event(raw) is None


def test_connection_counts_cap_users_and_the_process() -> None:
    counts = ConnectionCounts(ConnectionCaps(per_user=1, per_process=2))
    assert counts.open_process()
    assert counts.open_user("jwt:1")
    assert not counts.open_user("jwt:1")
    assert counts.open_process()
    assert counts.open_user("jwt:2")
    assert not counts.open_process()
    counts.close_user("jwt:1")
    counts.close_process()
    assert counts.open_process()
    assert counts.open_user("jwt:1")


@pytest.mark.parametrize(
    "text",
    [
        "[]",
        '{"type": 1}',
        '{"type": "subscribe", "payload": {"query": "x"}}',
        '{"type": "subscribe", "id": "1", "payload": []}',
        '{"type": "subscribe", "id": "1", "payload": {"query": "x", "variables": []}}',
        '{"type": "ping", "payload": {"n": 1e400}}',
        "[" * 100 + "]" * 100,
    ],
)
def test_messages_that_are_not_the_protocols_are_refused(text: str) -> None:
    with pytest.raises(MalformedMessage):
        parse_message(text)


def test_text_that_is_not_json_is_not_a_message() -> None:
    with pytest.raises(ValueError, match="Expecting") as refused:
        parse_message("{")
    # Not `MalformedMessage`: strawberry closes with "WebSocket message must be valid JSON".
    assert not isinstance(refused.value, MalformedMessage)


def test_the_token_comes_from_connection_inits_authorization_in_any_case() -> None:
    assert bearer_token({"authorization": "bearer abc"}) == "abc"
    assert bearer_token({"Authorization": "Basic abc"}) is None
    assert bearer_token({"Authorization": 3}) is None
