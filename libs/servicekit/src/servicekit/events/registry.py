"""Event types declared in code and shared with webhook-hub through a JetStream KV bucket."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig, StorageType
from nats.js.errors import BucketNotFoundError, NoKeysError
from pydantic import BaseModel

from servicekit.events.envelope import EVENT_TYPE_PATTERN

EVENT_TYPES_BUCKET = "event-types"
_TYPE_RE = re.compile(EVENT_TYPE_PATTERN)


class Visibility(StrEnum):
    """Who may receive a type's events. `personal`: they carry personal data of people other
    than the receiving consumer (a visitor's name, e-mail, message), so webhook-hub delivers
    them only to operator-approved owners, or to the one owner an event is for (`tenant`)."""

    PUBLIC = "public"
    PERSONAL = "personal"


@dataclass(frozen=True)
class EventTypeDefinition:
    name: str
    description: str
    payload_model: type[BaseModel]
    example: dict[str, Any]
    source: str
    visibility: Visibility = Visibility.PUBLIC
    json_schema: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        if not _TYPE_RE.match(self.name):
            raise ValueError(f"event type {self.name!r} is not of the form <resource>.<action>")
        # An example that does not fit its model is a bug in the declaration; fail at import.
        self.payload_model.model_validate(self.example)
        object.__setattr__(self, "json_schema", self.payload_model.model_json_schema())

    def to_document(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "example_payload": self.example,
            "schema": self.json_schema,
            "source": self.source,
            "visibility": self.visibility.value,
        }


class EventTypeRegistry:
    """The event types one service can emit."""

    def __init__(self, source: str) -> None:
        self.source = source
        self._types: dict[str, EventTypeDefinition] = {}

    def declare(
        self,
        name: str,
        payload_model: type[BaseModel],
        *,
        description: str,
        example: dict[str, Any],
        visibility: Visibility = Visibility.PUBLIC,
    ) -> EventTypeDefinition:
        if name in self._types:
            raise ValueError(f"event type {name!r} declared twice")
        definition = EventTypeDefinition(
            name, description, payload_model, example, self.source, visibility
        )
        self._types[name] = definition
        return definition

    def __iter__(self) -> Iterator[EventTypeDefinition]:
        return iter(self._types.values())

    def __contains__(self, name: object) -> bool:
        return name in self._types

    def __getitem__(self, name: str) -> EventTypeDefinition:
        return self._types[name]

    def names(self) -> list[str]:
        return sorted(self._types)


async def _bucket(js: JetStreamContext) -> Any:
    try:
        return await js.key_value(EVENT_TYPES_BUCKET)
    except BucketNotFoundError:
        return await js.create_key_value(
            KeyValueConfig(bucket=EVENT_TYPES_BUCKET, history=1, storage=StorageType.FILE)
        )


async def publish_event_types(js: JetStreamContext, registry: EventTypeRegistry) -> int:
    """Write every declared type into the shared bucket; returns how many."""
    bucket = await _bucket(js)
    count = 0
    for definition in registry:
        await bucket.put(definition.name, json.dumps(definition.to_document()).encode())
        count += 1
    return count


async def read_event_types(js: JetStreamContext) -> list[dict[str, Any]]:
    """Every type any service has published, as documents."""
    bucket = await _bucket(js)
    try:
        keys = await bucket.keys()
    except NoKeysError:
        return []
    documents = []
    for key in sorted(keys):
        entry = await bucket.get(key)
        if entry.value:
            documents.append(json.loads(entry.value))
    return documents
