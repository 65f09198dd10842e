"""JSON Schemas of event types, checked with the `jsonschema` package: is a schema one, and
where does a payload break it. Pure: no I/O, and never any: `$ref`s resolve only inside the
schema itself (an empty registry), so a schema cannot make the hub fetch a URL."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, cast

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import SchemaError
from jsonschema.protocols import Validator
from referencing import Registry
from referencing.exceptions import Unresolvable

# Errors named in one message: enough to fix a payload, bounded whatever the payload.
MAX_REPORTED = 10
_UNSET = object()


class SchemaProblem(ValueError):
    """The schema is not a JSON Schema this service can apply."""


def _validator_class(schema: dict[str, Any]) -> type[Validator]:
    found: Any = validators.validator_for(schema, default=cast("Any", _UNSET))
    if found is _UNSET:
        if "$schema" in schema:
            raise SchemaProblem(
                f"schema.$schema: {schema['$schema']!r} is not a JSON Schema draft this "
                "service knows (use 2020-12, 2019-09, 7, 6, 4 or 3, or leave it out for 2020-12)"
            )
        return Draft202012Validator
    validator_class: type[Validator] = found
    return validator_class


def _where(prefix: str, json_path: str) -> str:
    """`$.total` under `data` is `data.total`; `$` is `data` itself."""
    return prefix + json_path[1:]


def check_schema(schema: dict[str, Any]) -> None:
    """Raise SchemaProblem, naming the offending place, unless `schema` is a valid schema of
    its draft (`$schema`, 2020-12 when absent)."""
    validator_class = _validator_class(schema)
    try:
        validator_class.check_schema(schema)
    except SchemaError as exc:
        raise SchemaProblem(f"{_where('schema', exc.json_path)}: {exc.message}") from exc


def payload_errors(schema: dict[str, Any], payload: Any, prefix: str) -> list[str]:
    """Where `payload` breaks `schema`, e.g. `data.total: 'x' is not of type 'number'`, in
    document order (at most MAX_REPORTED); empty when it conforms. An empty schema accepts
    everything. Raises SchemaProblem when a `$ref` the payload reaches does not resolve."""
    if not schema:
        return []
    return validator_errors(_validator_class(schema)(schema, registry=Registry()), payload, prefix)


@lru_cache(maxsize=256)
def compiled_schema(schema_json: str) -> Validator | None:
    """The validator of a schema given as JSON text (as the database reads it out), built once
    per distinct text: building one cost more than checking a small event with it. Keyed by
    the text itself, so a changed schema is a new entry and never a stale validator. None for
    an empty schema (everything passes). Raises SchemaProblem as `payload_errors` does."""
    schema = json.loads(schema_json)
    if not schema:
        return None
    return _validator_class(schema)(schema, registry=Registry())


def validator_errors(validator: Validator | None, payload: Any, prefix: str) -> list[str]:
    """`payload_errors` with a validator built beforehand (`compiled_schema`)."""
    if validator is None:
        return []
    try:
        errors = sorted(validator.iter_errors(payload), key=lambda e: list(map(str, e.path)))
    except Unresolvable as exc:
        raise SchemaProblem(f"schema: $ref {exc.ref!r} does not resolve inside the schema") from exc
    return [f"{_where(prefix, error.json_path)}: {error.message}" for error in errors][
        :MAX_REPORTED
    ]
