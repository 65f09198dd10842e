"""Status values are StrEnums, the same in the tables, the SQL parameters, the events and the
GraphQL schema."""

from __future__ import annotations

import uuid

import httpx
from commerce_content.graphql_api.types import OrderStatus as GraphQLOrderStatus
from commerce_content.models import Inquiry, InquiryStatus, Order, OrderStatus
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlmodel import select
from sqlmodel.ext.asyncio.session import AsyncSession

from tests.factories import make_product


def test_graphqls_order_status_has_exactly_the_order_statuses() -> None:
    assert [s.value for s in GraphQLOrderStatus] == [s.value for s in OrderStatus]


async def test_an_order_read_back_has_its_status_as_the_enum_member(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    product = await make_product(db_engine)
    answer = await client.post(
        "/api/orders/checkout", json={"items": [{"productId": str(product), "quantity": 1}]}
    )
    async with AsyncSession(db_engine) as session:
        order = await session.get(Order, uuid.UUID(answer.json()["orderId"]))
    assert order is not None
    assert order.status is OrderStatus.PENDING


async def test_an_inquiry_is_stored_new(client: httpx.AsyncClient, db_engine: AsyncEngine) -> None:
    name = f"Status check {uuid.uuid4().hex[:6]}"
    body = {"name": name, "email": "check@example.com", "message": "Hello"}
    assert (await client.post("/api/contact", json=body)).status_code == 200
    async with AsyncSession(db_engine) as session:
        inquiry = (await session.exec(select(Inquiry).where(Inquiry.name == name))).one()
    assert inquiry.status is InquiryStatus.NEW
