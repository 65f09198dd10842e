"""@auth for each role (ADMIN > MANAGER > USER > GUEST), wrong credentials, and the product
management mutations a manager uses."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from commerce_content.settings import Settings
from servicekit.testing.conformance import create_key
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.factories import bearer_for, make_product, make_user
from tests.graphql_client import ask, global_id

DASHBOARD = "{ dashboardStats { productsTotal ordersPaid revenue } products(page: {first: 1}) { edges { cursor } } }"


async def as_role(engine: AsyncEngine, settings: Settings, role: str) -> dict[str, str]:
    return bearer_for(settings, await make_user(engine, role), role)


async def test_anonymous_callers_get_unauthenticated_for_guarded_fields_only(
    graphql_url: str,
) -> None:
    answer = await ask(graphql_url, DASHBOARD)
    assert answer.data["dashboardStats"] is None
    assert answer.data["products"] is not None  # the rest of the query still answers
    assert answer.codes == ["UNAUTHENTICATED"]
    assert answer.errors[0]["path"] == ["dashboardStats"]


async def test_a_guest_token_is_forbidden_what_needs_a_user(
    graphql_url: str, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    headers = await as_role(db_engine, service_settings, "guest")
    answer = await ask(graphql_url, "{ viewer { name orders { id } } }", headers=headers)
    assert answer.data["viewer"]["name"]
    assert answer.data["viewer"]["orders"] is None
    assert answer.codes == ["FORBIDDEN"]


async def test_a_user_is_forbidden_the_dashboard(
    graphql_url: str, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    answer = await ask(
        graphql_url, DASHBOARD, headers=await as_role(db_engine, service_settings, "user")
    )
    assert answer.data["dashboardStats"] is None
    assert answer.codes == ["FORBIDDEN"]
    assert answer.errors[0]["extensions"]["requires"] == "MANAGER"


async def test_a_manager_sees_the_dashboard_but_not_the_revenue(
    graphql_url: str, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    answer = await ask(
        graphql_url, DASHBOARD, headers=await as_role(db_engine, service_settings, "manager")
    )
    assert answer.data["dashboardStats"]["productsTotal"] >= 0
    assert answer.data["dashboardStats"]["revenue"] is None
    assert answer.codes == ["FORBIDDEN"]
    assert answer.errors[0]["path"] == ["dashboardStats", "revenue"]


async def test_an_admin_sees_everything(
    graphql_url: str, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    answer = await ask(
        graphql_url, DASHBOARD, headers=await as_role(db_engine, service_settings, "admin")
    )
    assert answer.errors == []
    assert answer.data["dashboardStats"]["revenue"].replace(".", "").isdigit()


async def test_api_keys_map_to_roles(
    graphql_url: str, service_command: str, service_settings: Settings
) -> None:
    key = create_key(service_command, service_settings, "write")
    answer = await ask(graphql_url, DASHBOARD, headers={"Authorization": f"Bearer {key}"})
    assert answer.data["dashboardStats"] is not None  # write level = MANAGER
    assert answer.codes == ["FORBIDDEN"]  # revenue needs ADMIN


async def test_a_bad_token_is_refused_with_401_and_a_graphql_error(graphql_url: str) -> None:
    async with httpx.AsyncClient() as http:
        response = await http.post(
            graphql_url,
            json={"query": "{ products { totalCount } }"},
            headers={"Authorization": "Bearer a.b.c"},
        )
    assert response.status_code == 401
    assert response.json()["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
    assert response.headers["www-authenticate"] == "Bearer"


CREATE = """
mutation($input: ProductCreateInput!) {
  createProduct(input: $input) { product { id name pricing { basePrice } } userErrors { field message code } }
}
"""


def new_product(**overrides: Any) -> dict[str, Any]:
    return {
        "name": "Teapot",
        "slug": f"teapot-{uuid.uuid4().hex[:8]}",
        "basePrice": "30.00",
        **overrides,
    }


async def test_users_may_not_manage_products(
    graphql_url: str, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    answer = await ask(
        graphql_url,
        CREATE,
        {"input": new_product()},
        headers=await as_role(db_engine, service_settings, "user"),
    )
    assert answer.data == {"createProduct": None}
    assert answer.codes == ["FORBIDDEN"]


async def test_a_manager_creates_publishes_updates_and_deletes_a_product(
    graphql_url: str, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    manager = await as_role(db_engine, service_settings, "manager")
    created = (await ask(graphql_url, CREATE, {"input": new_product()}, headers=manager)).data
    product = created["createProduct"]["product"]
    assert created["createProduct"]["userErrors"] == []
    public = "query($id: ID!) { product(id: $id) { name } }"
    assert (await ask(graphql_url, public, {"id": product["id"]})).data == {"product": None}

    published = await ask(
        graphql_url,
        "mutation($id: ID!) { publishProduct(id: $id) { product { id } userErrors { code } } }",
        {"id": product["id"]},
        headers=manager,
    )
    assert published.data["publishProduct"]["userErrors"] == []
    assert (await ask(graphql_url, public, {"id": product["id"]})).data == {
        "product": {"name": "Teapot"}
    }

    updated = await ask(
        graphql_url,
        "mutation($id: ID!, $input: ProductUpdateInput!) { updateProduct(id: $id, input: $input)"
        " { product { name pricing { basePrice salePrice } } userErrors { code } } }",
        {"id": product["id"], "input": {"name": "Big teapot", "salePrice": "25.00"}},
        headers=manager,
    )
    assert updated.data["updateProduct"]["product"] == {
        "name": "Big teapot",
        "pricing": {"basePrice": "30.00", "salePrice": "25.00"},
    }

    deleted = await ask(
        graphql_url,
        "mutation($id: ID!) { deleteProduct(id: $id) { deletedId userErrors { code } } }",
        {"id": product["id"]},
        headers=manager,
    )
    assert deleted.data["deleteProduct"] == {"deletedId": product["id"], "userErrors": []}
    assert (await ask(graphql_url, public, {"id": product["id"]})).data == {"product": None}


async def test_product_mutations_report_user_errors(
    graphql_url: str, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    manager = await as_role(db_engine, service_settings, "manager")
    taken = new_product()
    await ask(graphql_url, CREATE, {"input": taken}, headers=manager)
    duplicate = await ask(
        graphql_url, CREATE, {"input": new_product(slug=taken["slug"])}, headers=manager
    )
    assert duplicate.data["createProduct"]["userErrors"] == [
        {
            "field": ["input", "slug"],
            "message": f"The alias '{taken['slug']}' is already used",
            "code": "DUPLICATE_SLUG",
        }
    ]
    invalid = await ask(
        graphql_url,
        CREATE,
        {"input": new_product(basePrice="-1", slug="Not A Slug")},
        headers=manager,
    )
    problems = invalid.data["createProduct"]["userErrors"]
    assert {(tuple(p["field"]), p["code"]) for p in problems} == {
        (("input", "basePrice"), "INVALID"),
        (("input", "slug"), "INVALID"),
    }
    missing = await ask(
        graphql_url,
        "mutation($id: ID!) { publishProduct(id: $id) { product { id } userErrors { field code } } }",
        {"id": global_id("Product", 10**12)},
        headers=manager,
    )
    assert missing.data["publishProduct"] == {
        "product": None,
        "userErrors": [{"field": ["id"], "code": "NOT_FOUND"}],
    }


async def test_a_user_error_leaves_the_product_unchanged(
    graphql_url: str, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    manager = await as_role(db_engine, service_settings, "manager")
    product = await make_product(db_engine, name="Original")
    answer = await ask(
        graphql_url,
        "mutation($id: ID!, $input: ProductUpdateInput!) { updateProduct(id: $id, input: $input)"
        " { userErrors { code } } }",
        {
            "id": global_id("Product", product),
            "input": {"name": "Renamed", "categoryIds": ["999999"]},
        },
        headers=manager,
    )
    assert answer.data["updateProduct"]["userErrors"] == [{"code": "UNKNOWN_CATEGORY"}]
    check = await ask(
        graphql_url,
        "query($id: ID!) { product(id: $id) { name } }",
        {"id": global_id("Product", product)},
    )
    assert check.data == {"product": {"name": "Original"}}


async def test_a_null_base_price_is_a_user_error(
    graphql_url: str, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    manager = await as_role(db_engine, service_settings, "manager")
    product = await make_product(db_engine, price="10.00")
    answer = await ask(
        graphql_url,
        "mutation($id: ID!, $input: ProductUpdateInput!) { updateProduct(id: $id, input: $input)"
        " { product { pricing { basePrice } } userErrors { field code } } }",
        {"id": global_id("Product", product), "input": {"basePrice": None}},
        headers=manager,
    )
    assert answer.data["updateProduct"] == {
        "product": None,
        "userErrors": [{"field": ["input", "basePrice"], "code": "INVALID"}],
    }
