from __future__ import annotations

import uuid

import pytest
from nats.js import JetStreamContext
from pydantic import BaseModel, ValidationError
from servicekit.events.registry import (
    EventTypeRegistry,
    Visibility,
    publish_event_types,
    read_event_types,
)


class OrderCreated(BaseModel):
    id: int
    status: str
    total: str
    created_at: str


EXAMPLE = {"id": 1, "status": "pending", "total": "19.99", "created_at": "2026-11-22T10:00:00Z"}


def test_declared_type_carries_a_json_schema_from_its_model() -> None:
    registry = EventTypeRegistry("commerce-content")
    definition = registry.declare(
        "order.created", OrderCreated, description="An order was placed", example=EXAMPLE
    )
    assert definition.json_schema["properties"]["total"]["type"] == "string"
    assert set(definition.json_schema["required"]) == {"id", "status", "total", "created_at"}
    assert "order.created" in registry


def test_an_example_that_does_not_fit_its_model_is_refused() -> None:
    registry = EventTypeRegistry("commerce-content")
    with pytest.raises(ValidationError):
        registry.declare("order.created", OrderCreated, description="x", example={"id": "no"})


def test_a_name_not_of_the_resource_action_form_is_refused() -> None:
    registry = EventTypeRegistry("commerce-content")
    with pytest.raises(ValueError, match="resource"):
        registry.declare("ordercreated", OrderCreated, description="x", example=EXAMPLE)


def test_a_type_declared_twice_is_refused() -> None:
    registry = EventTypeRegistry("commerce-content")
    registry.declare("order.created", OrderCreated, description="x", example=EXAMPLE)
    with pytest.raises(ValueError, match="twice"):
        registry.declare("order.created", OrderCreated, description="x", example=EXAMPLE)


async def test_published_types_are_readable_by_any_service(js: JetStreamContext) -> None:
    name = f"order{uuid.uuid4().hex[:8]}.created"
    registry = EventTypeRegistry("commerce-content")
    registry.declare(name, OrderCreated, description="An order was placed", example=EXAMPLE)
    assert await publish_event_types(js, registry) == 1
    documents = {doc["name"]: doc for doc in await read_event_types(js)}
    assert documents[name]["example_payload"] == EXAMPLE
    assert documents[name]["source"] == "commerce-content"
    assert documents[name]["description"] == "An order was placed"
    assert "properties" in documents[name]["schema"]


def test_a_type_is_public_unless_declared_personal() -> None:
    registry = EventTypeRegistry("commerce-content")
    public = registry.declare("order.created", OrderCreated, description="x", example=EXAMPLE)
    personal = registry.declare(
        "inquiry.created",
        OrderCreated,
        description="x",
        example=EXAMPLE,
        visibility=Visibility.PERSONAL,
    )
    assert public.to_document()["visibility"] == "public"
    assert personal.to_document()["visibility"] == "personal"
