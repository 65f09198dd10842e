"""Custom event types (issue 14, defect 4): registered with a JSON schema and an example that
must match it, changed and deactivated with PATCH by their owner (or an operator), and
enforced on subscriptions and on `POST /webhooks/events`."""

from __future__ import annotations

from typing import Any

import httpx
from servicekit.testing.receiver import HttpReceiver
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.factories import Consumer, make_consumer
from tests.factories import unique_type_name as unique

INVOICE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"id": {"type": "string"}, "total": {"type": "number"}},
    "required": ["id", "total"],
}


def invoice_type(name: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "description": "An invoice was paid",
        "schema": INVOICE_SCHEMA,
        "example_payload": {"id": "inv_1", "total": 10.5},
        **extra,
    }


async def post_type(
    client: httpx.AsyncClient, caller: Consumer, body: dict[str, Any]
) -> httpx.Response:
    """`POST /webhooks/event-types`, its answer as it is."""
    return await client.post("/webhooks/event-types", json=body, headers=caller.headers)


async def register(client: httpx.AsyncClient, owner: Consumer, name: str, **extra: Any) -> str:
    response = await post_type(client, owner, invoice_type(name, **extra))
    assert response.status_code == 201, response.text
    return name


async def owner_and_type(client: httpx.AsyncClient, engine: AsyncEngine) -> tuple[Consumer, str]:
    """A new admin consumer and the invoice type it registered (under a unique name)."""
    alice = await make_consumer(engine)
    return alice, await register(client, alice, unique("invoice.paid"))


async def events_of_type(engine: AsyncEngine, event_type: str) -> int:
    async with engine.connect() as conn:
        count = await conn.scalar(
            text("SELECT count(*) FROM outbox_events WHERE type = :t"), {"t": event_type}
        )
    return int(count or 0)


async def patch_type(
    client: httpx.AsyncClient, caller: Consumer, name: str, changes: dict[str, Any]
) -> httpx.Response:
    return await client.patch(f"/webhooks/event-types/{name}", json=changes, headers=caller.headers)


async def submit(
    client: httpx.AsyncClient, caller: Consumer, name: str, data: dict[str, Any], **extra: Any
) -> httpx.Response:
    return await client.post(
        "/webhooks/events", json={"type": name, "data": data, **extra}, headers=caller.headers
    )


async def subscribe_to(client: httpx.AsyncClient, owner: Consumer, name: str) -> httpx.Response:
    return await client.post(
        "/webhooks/subscriptions",
        json={"endpoint_url": "http://127.0.0.1:9/hook", "events": [name]},
        headers=owner.headers,
    )


# --- registering -----------------------------------------------------------------------------


async def test_a_type_is_registered_with_its_schema_and_example(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    alice, name = await owner_and_type(client, db_engine)
    listed = await client.get("/webhooks/event-types", headers=alice.headers)
    mine = next(t for t in listed.json()["data"] if t["name"] == name)
    assert mine["schema"] == INVOICE_SCHEMA
    assert mine["example_payload"] == {"id": "inv_1", "total": 10.5}


async def test_a_type_may_be_registered_with_example_and_json_schema_as_the_words(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    alice = await make_consumer(db_engine)
    name = unique("invoice.paid")
    response = await post_type(
        client,
        alice,
        {
            "name": name,
            "description": "An invoice was paid",
            "json_schema": INVOICE_SCHEMA,
            "example": {"id": "inv_2", "total": 3},
        },
    )
    assert response.status_code == 201
    assert response.json()["schema"] == INVOICE_SCHEMA
    assert response.json()["example_payload"] == {"id": "inv_2", "total": 3}
    refused = await submit(client, alice, name, {"id": "inv_3", "total": "x"})
    assert refused.status_code == 422


async def test_a_schema_that_is_not_a_json_schema_is_422_naming_where(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    alice = await make_consumer(db_engine)
    name = unique("invoice.paid")
    response = await post_type(
        client,
        alice,
        invoice_type(name, schema={"type": "object", "properties": {"total": {"type": 5}}}),
    )
    assert response.status_code == 422
    assert response.json()["code"] == "invalid_schema"
    assert response.json()["error"].startswith("schema.properties.total.type:")
    listed = await client.get("/webhooks/event-types", headers=alice.headers)
    assert name not in {t["name"] for t in listed.json()["data"]}


async def test_a_schema_of_an_unknown_draft_is_422(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    alice = await make_consumer(db_engine)
    response = await post_type(
        client,
        alice,
        invoice_type(unique("invoice.paid"), schema={"$schema": "https://example.com/x"}),
    )
    assert response.status_code == 422
    assert response.json()["code"] == "invalid_schema"


async def test_an_example_that_breaks_the_schema_is_422_naming_the_path(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    alice = await make_consumer(db_engine)
    response = await post_type(
        client,
        alice,
        invoice_type(unique("invoice.paid"), example_payload={"id": "i", "total": "x"}),
    )
    assert response.status_code == 422
    assert response.json()["code"] == "example_payload_invalid"
    assert response.json()["errors"] == ["example_payload.total: 'x' is not of type 'number'"]


async def test_a_remote_ref_is_never_fetched(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    alice = await make_consumer(db_engine)
    schema = {"$ref": f"{http_receiver.url}/schema.json"}
    response = await post_type(client, alice, invoice_type(unique("invoice.paid"), schema=schema))
    assert response.status_code == 422
    assert response.json()["code"] == "invalid_schema"
    assert http_receiver.requests == []


async def test_a_type_without_a_schema_accepts_any_data(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    alice = await make_consumer(db_engine)
    name = await register(client, alice, unique("note.sent"), schema={}, example_payload={})
    response = await submit(client, alice, name, {"anything": [1, "x"]})
    assert response.status_code == 202


# --- producer events against the schema ------------------------------------------------------


async def test_an_event_matching_the_schema_is_accepted(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    alice, name = await owner_and_type(client, db_engine)
    response = await submit(client, alice, name, {"id": "inv_2", "total": 3})
    assert response.status_code == 202
    assert await events_of_type(db_engine, name) == 1


async def test_an_event_breaking_the_schema_is_422_naming_the_path_and_stores_nothing(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    alice, name = await owner_and_type(client, db_engine)
    response = await client.post(
        "/webhooks/events",
        json={"type": name, "data": {"id": "inv_2", "total": "x"}},
        headers={**alice.headers, "Idempotency-Key": "k-1"},
    )
    assert response.status_code == 422
    assert response.json()["code"] == "event_data_invalid"
    assert "data.total: 'x' is not of type 'number'" in response.json()["error"]
    assert response.json()["errors"] == ["data.total: 'x' is not of type 'number'"]
    assert await events_of_type(db_engine, name) == 0
    # The key was not spent on the refused event.
    fixed = await client.post(
        "/webhooks/events",
        json={"type": name, "data": {"id": "inv_2", "total": 1}},
        headers={**alice.headers, "Idempotency-Key": "k-1"},
    )
    assert fixed.status_code == 202
    assert "idempotent-replayed" not in fixed.headers


async def test_a_missing_required_member_is_named_at_data(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    alice, name = await owner_and_type(client, db_engine)
    response = await submit(client, alice, name, {"id": "inv_3"})
    assert response.status_code == 422
    assert response.json()["errors"] == ["data: 'total' is a required property"]


async def test_an_operators_event_of_a_registered_type_is_checked_too(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    alice = await make_consumer(db_engine)
    operator = await make_consumer(db_engine, "operator")
    name = await register(client, alice, unique("invoice.paid"))
    response = await submit(client, operator, name, {"id": 7, "total": 1}, tenant=alice.owner)
    assert response.status_code == 422
    assert response.json()["errors"] == ["data.id: 7 is not of type 'string'"]


async def test_an_operators_event_of_an_unregistered_type_is_accepted_unchecked(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    operator = await make_consumer(db_engine, "operator")
    name = unique("uxtest.happened")
    response = await submit(client, operator, name, {"any": "thing"})
    assert response.status_code == 202
    assert await events_of_type(db_engine, name) == 1


# --- changing and deactivating ----------------------------------------------------------------


async def test_the_owner_changes_description_schema_and_example(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    alice, name = await owner_and_type(client, db_engine)
    schema = {"type": "object", "properties": {"total": {"type": "integer"}}}
    response = await patch_type(
        client,
        alice,
        name,
        {"description": "Paid in full", "schema": schema, "example_payload": {"total": 3}},
    )
    assert response.status_code == 200, response.text
    assert response.json()["description"] == "Paid in full"
    assert response.json()["schema"] == schema
    submitted = await submit(client, alice, name, {"total": 3.5})
    assert submitted.json()["errors"] == ["data.total: 3.5 is not of type 'integer'"]


async def test_a_new_schema_the_stored_example_breaks_is_422(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    alice, name = await owner_and_type(client, db_engine)
    response = await patch_type(
        client, alice, name, {"schema": {"type": "object", "required": ["currency"]}}
    )
    assert response.status_code == 422
    assert response.json()["code"] == "example_payload_invalid"


async def test_a_patched_schema_that_is_not_a_schema_is_422(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    alice, name = await owner_and_type(client, db_engine)
    response = await patch_type(client, alice, name, {"schema": {"type": "nope"}})
    assert response.status_code == 422
    assert response.json()["code"] == "invalid_schema"


async def test_another_owners_type_is_404_to_patch(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    alice = await make_consumer(db_engine)
    bob = await make_consumer(db_engine)
    name = await register(client, bob, unique("invoice.paid"))
    response = await patch_type(client, alice, name, {"is_active": False})
    assert response.status_code == 404
    assert response.json()["code"] == "event_type_not_found"
    still = await client.get("/webhooks/event-types", headers=bob.headers)
    assert next(t for t in still.json()["data"] if t["name"] == name)["is_active"] is True


async def test_a_services_type_is_404_to_a_consumers_key(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    alice = await make_consumer(db_engine)
    response = await patch_type(client, alice, "order.paid", {"is_active": False})
    assert response.status_code == 404


async def test_an_unknown_type_is_404_to_patch(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    alice = await make_consumer(db_engine)
    response = await patch_type(client, alice, unique("never.registered"), {"is_active": False})
    assert response.status_code == 404


async def test_patching_needs_the_admin_level(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    alice, name = await owner_and_type(client, db_engine)
    writer = await make_consumer(db_engine, "write", owner=alice.owner)
    response = await patch_type(client, writer, name, {"is_active": False})
    assert response.status_code == 403


async def test_an_operator_deactivates_another_owners_type(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    alice = await make_consumer(db_engine)
    operator = await make_consumer(db_engine, "operator")
    name = await register(client, alice, unique("invoice.paid"))
    response = await patch_type(client, operator, name, {"is_active": False})
    assert response.status_code == 200
    assert response.json()["is_active"] is False


async def test_an_operator_changes_only_is_active_of_a_services_type(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    operator = await make_consumer(db_engine, "operator")
    # `legacy.retired` is a seeded service type, inactive already: the state stays as it was.
    toggled = await patch_type(client, operator, "legacy.retired", {"is_active": False})
    assert toggled.status_code == 200
    described = await patch_type(client, operator, "legacy.retired", {"description": "mine now"})
    assert described.status_code == 409
    assert described.json()["code"] == "declared_by_service"


async def test_a_deactivated_type_can_no_longer_be_subscribed_to(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    alice, name = await owner_and_type(client, db_engine)
    deactivated = await patch_type(client, alice, name, {"is_active": False})
    assert deactivated.json()["is_active"] is False
    response = await subscribe_to(client, alice, name)
    assert response.status_code == 422
    assert response.json()["code"] == "unknown_event_types"
    assert response.json()["invalid_events"] == [name]


async def test_events_of_a_deactivated_type_are_refused_and_nothing_is_stored(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    alice, name = await owner_and_type(client, db_engine)
    await patch_type(client, alice, name, {"is_active": False})
    response = await submit(client, alice, name, {"id": "inv_1", "total": 1})
    assert response.status_code == 422
    assert response.json()["code"] == "event_type_inactive"
    assert await events_of_type(db_engine, name) == 0


async def test_an_operators_event_of_a_deactivated_type_is_refused_too(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    operator = await make_consumer(db_engine, "operator")
    response = await submit(client, operator, "legacy.retired", {})
    assert response.status_code == 422
    assert response.json()["code"] == "event_type_inactive"


async def test_a_reactivated_type_can_be_subscribed_to_again(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    alice, name = await owner_and_type(client, db_engine)
    for active in (False, True):
        await patch_type(client, alice, name, {"is_active": active})
    assert (await subscribe_to(client, alice, name)).status_code == 201


async def test_an_example_payload_with_a_number_no_float_holds_is_422(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    """Read as `inf`, the example reached the event type's json column: a 500 before."""
    producer = await make_consumer(db_engine, "admin")
    name = unique("invoice.paid")
    response = await client.post(
        "/webhooks/event-types",
        content=f'{{"name": "{name}", "example_payload": {{"total": -1e400}}}}',
        headers={**producer.headers, "Content-Type": "application/json"},
    )
    assert response.status_code == 422, response.text
    assert "body.example_payload.total is a number outside" in response.json()["error"]
    async with db_engine.connect() as conn:
        stored = await conn.scalar(
            text("SELECT count(*) FROM event_types WHERE name = :n"), {"n": name}
        )
    assert stored == 0
