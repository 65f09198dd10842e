"""GraphQL products: Relay paging, every filter, global ids, drafts, constant query count."""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any

from commerce_content.settings import Settings
from fastapi import FastAPI
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.factories import bearer_for, make_category, make_product, make_user, make_variant
from tests.graphql_client import PRODUCT_PAGE, ask, global_id


async def tagged_products(engine: AsyncEngine, count: int, **kwargs: Any) -> tuple[str, list[int]]:
    """`count` published products sharing a fresh tag, so a test sees only its own rows."""
    tag = f"t-{uuid.uuid4().hex[:8]}"
    ids = [await make_product(engine, tags=[tag], **kwargs) for _ in range(count)]
    return tag, ids


def names_of(answer_data: dict[str, Any]) -> list[str]:
    return [edge["node"]["id"] for edge in answer_data["products"]["edges"]]


async def page(url: str, tag: str, **pagination: Any) -> dict[str, Any]:
    answer = await ask(url, PRODUCT_PAGE, {"filter": {"tags": [tag]}, "page": pagination})
    assert answer.errors == []
    return dict(answer.data["products"])


async def test_paging_forwards_visits_every_product_once_despite_inserts_between_pages(
    graphql_url: str, db_engine: AsyncEngine
) -> None:
    tag, ids = await tagged_products(db_engine, 5)
    first = await page(graphql_url, tag, first=2)
    assert [e["node"]["id"] for e in first["edges"]] == [global_id("Product", i) for i in ids[:2]]
    assert first["pageInfo"]["hasNextPage"] is True
    assert first["pageInfo"]["hasPreviousPage"] is False
    # A product added after the first page was read lands at the end, not in the middle.
    late = await make_product(db_engine, tags=[tag])
    second = await page(graphql_url, tag, first=2, after=first["pageInfo"]["endCursor"])
    assert [e["node"]["id"] for e in second["edges"]] == [global_id("Product", i) for i in ids[2:4]]
    assert second["pageInfo"]["hasPreviousPage"] is True
    third = await page(graphql_url, tag, first=2, after=second["pageInfo"]["endCursor"])
    assert [e["node"]["id"] for e in third["edges"]] == [
        global_id("Product", ids[4]),
        global_id("Product", late),
    ]
    assert third["pageInfo"]["hasNextPage"] is False
    assert third["pageInfo"]["hasPreviousPage"] is True


async def test_paging_backwards_with_last_and_before(
    graphql_url: str, db_engine: AsyncEngine
) -> None:
    tag, ids = await tagged_products(db_engine, 5)
    last = await page(graphql_url, tag, last=2)
    assert [e["node"]["id"] for e in last["edges"]] == [global_id("Product", i) for i in ids[3:]]
    assert last["pageInfo"]["hasPreviousPage"] is True
    assert last["pageInfo"]["hasNextPage"] is False
    await make_product(db_engine, tags=[tag])  # after the window: it must not appear
    earlier = await page(graphql_url, tag, last=2, before=last["pageInfo"]["startCursor"])
    assert [e["node"]["id"] for e in earlier["edges"]] == [
        global_id("Product", i) for i in ids[1:3]
    ]
    assert earlier["pageInfo"]["hasNextPage"] is True
    assert earlier["pageInfo"]["hasPreviousPage"] is True
    start = await page(graphql_url, tag, last=2, before=earlier["pageInfo"]["startCursor"])
    assert [e["node"]["id"] for e in start["edges"]] == [global_id("Product", ids[0])]
    assert start["pageInfo"]["hasPreviousPage"] is False
    assert start["pageInfo"]["hasNextPage"] is True


async def test_an_empty_page_has_no_cursors(graphql_url: str) -> None:
    answer = await page(graphql_url, f"none-{uuid.uuid4().hex}", first=5)
    assert answer["edges"] == []
    assert answer["pageInfo"] == {
        "hasNextPage": False,
        "hasPreviousPage": False,
        "startCursor": None,
        "endCursor": None,
    }


async def test_first_and_last_together_are_refused(graphql_url: str) -> None:
    answer = await ask(graphql_url, PRODUCT_PAGE, {"page": {"first": 2, "last": 2}})
    assert answer.codes == ["BAD_USER_INPUT"]
    assert "either `first` or `last`" in answer.errors[0]["message"]
    assert answer.data is None


async def test_negative_counts_are_refused(graphql_url: str) -> None:
    for name in ("first", "last"):
        answer = await ask(graphql_url, PRODUCT_PAGE, {"page": {name: -1}})
        assert answer.codes == ["BAD_USER_INPUT"]
        assert f"`{name}` must not be negative" in answer.errors[0]["message"]


async def test_pages_are_at_most_one_hundred(graphql_url: str) -> None:
    answer = await ask(graphql_url, PRODUCT_PAGE, {"page": {"first": 101}})
    assert answer.codes == ["BAD_USER_INPUT"]
    assert "at most 100" in answer.errors[0]["message"]


async def test_a_forged_cursor_is_refused(graphql_url: str) -> None:
    answer = await ask(
        graphql_url, PRODUCT_PAGE, {"page": {"first": 1, "after": "bm90LWEtY3Vyc29y"}}
    )
    assert answer.codes == ["BAD_USER_INPUT"]


async def test_total_count_counts_every_match_not_the_page(
    graphql_url: str, db_engine: AsyncEngine
) -> None:
    tag, _ = await tagged_products(db_engine, 3)
    answer = await ask(
        graphql_url,
        "query($tag: String!) { products(filter: {tags: [$tag]}, page: {first: 1})"
        " { totalCount edges { node { id } } } }",
        {"tag": tag},
    )
    assert answer.data["products"]["totalCount"] == 3
    assert len(answer.data["products"]["edges"]) == 1


FILTERED = """
query($filter: ProductFilter) { products(filter: $filter, page: {first: 50}) { edges { node { id } } } }
"""


async def filtered(url: str, **criteria: Any) -> set[str]:
    answer = await ask(url, FILTERED, {"filter": criteria})
    assert answer.errors == [], answer.errors
    return {edge["node"]["id"] for edge in answer.data["products"]["edges"]}


async def test_category_filter_keeps_products_of_any_given_category(
    graphql_url: str, db_engine: AsyncEngine
) -> None:
    tag = f"t-{uuid.uuid4().hex[:8]}"
    mugs, cups = await make_category(db_engine, "Mugs"), await make_category(db_engine, "Cups")
    mug = await make_product(db_engine, tags=[tag], category_ids=[mugs])
    cup = await make_product(db_engine, tags=[tag], category_ids=[cups])
    await make_product(db_engine, tags=[tag])
    assert await filtered(graphql_url, tags=[tag], categoryIds=[str(mugs)]) == {
        global_id("Product", mug)
    }
    assert await filtered(graphql_url, tags=[tag], categoryIds=[str(mugs), str(cups)]) == {
        global_id("Product", mug),
        global_id("Product", cup),
    }


async def test_price_range_applies_to_the_current_price(
    graphql_url: str, db_engine: AsyncEngine
) -> None:
    tag = f"t-{uuid.uuid4().hex[:8]}"
    cheap = await make_product(db_engine, tags=[tag], price="5.00")
    on_sale = await make_product(db_engine, tags=[tag], price="50.00", sale_price="9.99")
    dear = await make_product(db_engine, tags=[tag], price="80.00")
    assert await filtered(graphql_url, tags=[tag], priceMax="10.00") == {
        global_id("Product", cheap),
        global_id("Product", on_sale),
    }
    assert await filtered(graphql_url, tags=[tag], priceMin="9.99", priceMax="80.00") == {
        global_id("Product", on_sale),
        global_id("Product", dear),
    }


async def test_in_stock_filter(graphql_url: str, db_engine: AsyncEngine) -> None:
    tag = f"t-{uuid.uuid4().hex[:8]}"
    stocked = await make_product(db_engine, tags=[tag], stock=3)
    sold_out = await make_product(db_engine, tags=[tag], stock=0)
    assert await filtered(graphql_url, tags=[tag], inStock=True) == {global_id("Product", stocked)}
    assert await filtered(graphql_url, tags=[tag], inStock=False) == {
        global_id("Product", sold_out)
    }


async def test_search_matches_name_or_description_case_insensitively(
    graphql_url: str, db_engine: AsyncEngine
) -> None:
    word = uuid.uuid4().hex[:10]
    by_name = await make_product(db_engine, name=f"Mug {word.upper()}")
    by_description = await make_product(db_engine, description=f"made of {word} clay")
    assert await filtered(graphql_url, search=word) == {
        global_id("Product", by_name),
        global_id("Product", by_description),
    }


async def test_tags_filter_keeps_products_with_any_given_tag(
    graphql_url: str, db_engine: AsyncEngine
) -> None:
    red, blue = f"red-{uuid.uuid4().hex[:6]}", f"blue-{uuid.uuid4().hex[:6]}"
    a = await make_product(db_engine, tags=[red])
    b = await make_product(db_engine, tags=[blue, "other"])
    assert await filtered(graphql_url, tags=[red]) == {global_id("Product", a)}
    assert await filtered(graphql_url, tags=[red, blue]) == {
        global_id("Product", a),
        global_id("Product", b),
    }


async def test_filters_combine(graphql_url: str, db_engine: AsyncEngine) -> None:
    tag = f"t-{uuid.uuid4().hex[:8]}"
    category = await make_category(db_engine)
    word = uuid.uuid4().hex[:8]
    match = await make_product(
        db_engine, tags=[tag], category_ids=[category], price="12.00", stock=2, name=f"x {word}"
    )
    await make_product(
        db_engine, tags=[tag], category_ids=[category], price="12.00", stock=0, name=f"x {word}"
    )
    await make_product(
        db_engine, tags=[tag], category_ids=[category], price="99.00", stock=2, name=f"x {word}"
    )
    await make_product(db_engine, tags=[tag], price="12.00", stock=2, name=f"x {word}")
    await make_product(db_engine, tags=[tag], category_ids=[category], price="12.00", stock=2)
    assert await filtered(
        graphql_url,
        tags=[tag],
        categoryIds=[str(category)],
        priceMin="10",
        priceMax="20",
        inStock=True,
        search=word,
    ) == {global_id("Product", match)}


async def test_prices_travel_as_decimal_strings(graphql_url: str, db_engine: AsyncEngine) -> None:
    product = await make_product(db_engine, price="19.90", sale_price="12.345")
    answer = await ask(
        graphql_url,
        "query($id: ID!) { product(id: $id) { price pricing { basePrice salePrice currency } } }",
        {"id": global_id("Product", product)},
    )
    assert answer.data["product"] == {
        "price": "19.90",
        "pricing": {"basePrice": "19.90", "salePrice": "12.35", "currency": "USD"},
    }


async def test_a_float_price_filter_is_refused(graphql_url: str) -> None:
    answer = await ask(graphql_url, FILTERED, {"filter": {"priceMin": 9.99}})
    assert answer.data is None
    assert "Decimal values are strings" in answer.errors[0]["message"]


async def test_node_fetches_products_and_variants_by_global_id(
    graphql_url: str, db_engine: AsyncEngine
) -> None:
    product = await make_product(db_engine, price="10.00")
    variant = await make_variant(db_engine, product, price="12.50", stock=0)
    answer = await ask(
        graphql_url,
        "query($p: ID!, $v: ID!) { p: node(id: $p) { id ... on Product { name } }"
        " v: node(id: $v) { ... on ProductVariant { price inStock } } }",
        {"p": global_id("Product", product), "v": global_id("ProductVariant", variant)},
    )
    assert answer.data["p"]["id"] == global_id("Product", product)
    assert answer.data["v"] == {"price": "12.50", "inStock": False}


async def test_unpublished_products_are_hidden_from_shoppers_and_shown_to_managers(
    graphql_url: str, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    draft = await make_product(db_engine, published=False)
    query = "query($id: ID!) { product(id: $id) { name } }"
    variables = {"id": global_id("Product", draft)}
    assert (await ask(graphql_url, query, variables)).data == {"product": None}
    manager = bearer_for(service_settings, await make_user(db_engine, "manager"), "manager")
    answer = await ask(graphql_url, query, variables, headers=manager)
    assert answer.data["product"] is not None
    assert "private" in answer.headers["cache-control"]


async def test_a_malformed_id_is_a_clear_error(graphql_url: str) -> None:
    answer = await ask(graphql_url, '{ product(id: "%%%") { name } }')
    assert answer.codes == ["BAD_USER_INPUT"]


async def test_the_number_of_queries_does_not_grow_with_the_page_size(
    graphql_app: FastAPI, graphql_url: str, db_engine: AsyncEngine
) -> None:
    tag = f"t-{uuid.uuid4().hex[:8]}"
    for _ in range(30):
        product = await make_product(db_engine, tags=[tag], price=str(Decimal("3.50")))
        await make_variant(db_engine, product)
    query = (
        "query($tag: String!, $n: Int!) { products(filter: {tags: [$tag]}, page: {first: $n})"
        " { edges { node { pricing { basePrice } variants { sku price } } } } }"
    )
    engine = graphql_app.state.runtime.engine.sync_engine
    statements: list[str] = []

    def count(*args: Any) -> None:
        statements.append(str(args[2]))

    counts = {}
    # Once before counting: the first request of a document takes the general path, the next
    # ones a prepared one (`prepared.py`, `direct.py`), which reads a page in fewer queries.
    await ask(graphql_url, query, {"tag": tag, "n": 1})
    event.listen(engine, "before_cursor_execute", count)
    try:
        for size in (1, 10, 30):
            statements.clear()
            answer = await ask(graphql_url, query, {"tag": tag, "n": size})
            assert len(answer.data["products"]["edges"]) == size
            assert all(len(e["node"]["variants"]) == 1 for e in answer.data["products"]["edges"])
            counts[size] = len(statements)
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert counts[1] == counts[10] == counts[30]
