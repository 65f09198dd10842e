"""The JSON Schema checks of event types, as pure functions."""

from __future__ import annotations

import pytest
from webhook_hub.event_types.schema_check import (
    MAX_REPORTED,
    SchemaProblem,
    check_schema,
    compiled_schema,
    payload_errors,
    validator_errors,
)

ORDER = {
    "type": "object",
    "properties": {
        "total": {"type": "number"},
        "lines": {"type": "array", "items": {"type": "object", "required": ["sku"]}},
    },
}


def test_a_valid_schema_passes() -> None:
    check_schema(ORDER)


def test_an_invalid_keyword_value_is_named_by_its_place_in_the_schema() -> None:
    with pytest.raises(SchemaProblem, match=r"^schema\.properties\.total\.type: "):
        check_schema({"properties": {"total": {"type": "decimal"}}})


def test_an_unknown_draft_is_refused() -> None:
    with pytest.raises(SchemaProblem, match=r"schema\.\$schema"):
        check_schema({"$schema": "https://example.com/my-draft"})


def test_the_draft_named_by_schema_applies() -> None:
    # Draft 4's exclusiveMaximum is a boolean; 2020-12 would refuse it.
    draft4 = "http://json-schema.org/draft-04/schema#"
    check_schema({"$schema": draft4, "maximum": 10, "exclusiveMaximum": True})
    with pytest.raises(SchemaProblem):
        check_schema({"maximum": 10, "exclusiveMaximum": True})


def test_errors_name_the_path_under_the_prefix() -> None:
    errors = payload_errors(ORDER, {"total": "x", "lines": [{"sku": 1}, {}]}, "data")
    assert errors == [
        "data.lines[1]: 'sku' is a required property",
        "data.total: 'x' is not of type 'number'",
    ]


def test_a_conforming_payload_has_no_errors() -> None:
    assert payload_errors(ORDER, {"total": 1, "lines": [{"sku": "a"}]}, "data") == []


def test_an_empty_schema_accepts_anything() -> None:
    assert payload_errors({}, {"whatever": [1, None]}, "data") == []


def test_errors_are_bounded() -> None:
    schema = {"type": "object", "additionalProperties": {"type": "integer"}}
    payload = {f"k{i}": "x" for i in range(50)}
    assert len(payload_errors(schema, payload, "data")) == MAX_REPORTED


def test_a_ref_outside_the_schema_is_a_schema_problem_not_a_fetch() -> None:
    with pytest.raises(SchemaProblem, match="does not resolve"):
        payload_errors({"$ref": "http://127.0.0.1:9/other.json"}, {}, "data")


def test_a_ref_inside_the_schema_resolves() -> None:
    schema = {
        "$defs": {"money": {"type": "number"}},
        "properties": {"total": {"$ref": "#/$defs/money"}},
    }
    assert payload_errors(schema, {"total": "x"}, "data") == [
        "data.total: 'x' is not of type 'number'"
    ]


def test_a_schema_text_is_compiled_once_and_a_changed_text_gets_its_own_validator() -> None:
    first = compiled_schema('{"type": "object", "required": ["x"]}')
    assert compiled_schema('{"type": "object", "required": ["x"]}') is first
    changed = compiled_schema('{"type": "object", "required": ["y"]}')
    assert validator_errors(first, {"y": 1}, "data") == ["data: 'x' is a required property"]
    assert validator_errors(changed, {"y": 1}, "data") == []
    assert compiled_schema("{}") is None
