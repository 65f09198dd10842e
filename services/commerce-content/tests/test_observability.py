"""What operators see: the request id and trace ids in log lines, one span per GraphQL
operation with its name and cost."""

from __future__ import annotations

import uuid

import httpx
import pytest
from servicekit.testing.tracing import RecordedSpans
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.factories import make_product
from tests.graphql_client import ask


async def test_a_checkouts_request_id_is_in_its_log_lines(
    capsys: pytest.CaptureFixture[str], client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    product = await make_product(db_engine, price="5.00", stock=3)
    request_id = f"checkout-{uuid.uuid4().hex}"
    response = await client.post(
        "/api/orders/checkout",
        json={"items": [{"productId": str(product), "quantity": 1}]},
        headers={"X-Request-ID": request_id},
    )
    assert response.status_code == 200, response.text
    lines = [line for line in capsys.readouterr().err.splitlines() if "checkout created" in line]
    assert len(lines) == 1
    assert request_id in lines[0]
    assert response.json()["orderId"] in lines[0]


async def test_a_graphql_operation_is_one_span_with_its_name_and_cost(
    spans: RecordedSpans, graphql_url: str
) -> None:
    answer = await ask(
        graphql_url, "query CheapMugs { products(page: {first: 3}) { edges { node { id name } } } }"
    )
    assert answer.errors == []

    operation = spans.named("query CheapMugs")
    assert operation.attributes is not None
    assert operation.attributes["graphql.operation.name"] == "CheapMugs"
    assert operation.attributes["graphql.operation.type"] == "query"
    assert (
        operation.attributes["graphql.operation.cost"]
        == answer.extensions["cost"][  # type: ignore[index]
            "requestedQueryCost"
        ]
    )
    # Not a span per field or resolver: ours is the only one from servicekit's tracer.
    ours = [
        s
        for s in spans.finished
        if s.instrumentation_scope and s.instrumentation_scope.name == "servicekit"
    ]
    assert [s.name for s in ours] == ["query CheapMugs"]


async def test_an_anonymous_operation_refused_for_its_cost_is_an_error_span(
    spans: RecordedSpans, graphql_url: str
) -> None:
    answer = await ask(
        graphql_url,
        "{ products(page: {first: 100}) { edges { node { variants { id } pricing { basePrice } } } } }",
    )
    assert answer.codes == ["MAX_COST_EXCEEDED"]

    operation = spans.named("query")
    assert operation.attributes is not None
    assert "graphql.operation.name" not in operation.attributes
    assert int(operation.attributes["graphql.operation.cost"]) > 0  # type: ignore[arg-type]
    assert not operation.status.is_ok
