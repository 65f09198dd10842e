"""The input guard's decisions, as pure functions (the answers over HTTP are in the conformance
tests every service runs)."""

from __future__ import annotations

import pytest
from servicekit.web.input_guard import (
    InvalidNumber,
    InvalidText,
    bad_text_in,
    bad_text_reason,
    check_form_body,
    check_json_body,
    document_input_limits,
    json_depth_exceeds,
    load_finite_json,
    may_hold_non_finite,
)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("plain text", None),
        ("émoji 🎉 and ünïcode", None),
        ("a\x00b", "NUL"),
        ("a\ud800b", "surrogate"),
        ("\udfff", "surrogate"),
    ],
)
def test_text_is_judged_storable_or_not(value: str, reason: str | None) -> None:
    found = bad_text_reason(value)
    assert (found is None) if reason is None else (reason in (found or ""))


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def test_json_nested_to_the_limit_passes() -> None:
    assert not json_depth_exceeds(nested(64), 64)


def test_json_nested_past_the_limit_is_found() -> None:
    assert json_depth_exceeds(nested(65), 64)


def test_json_nested_twenty_thousand_deep_is_found_without_recursion() -> None:
    assert json_depth_exceeds(b'{"a": ' + nested(20_000) + b"}", 64)


def test_brackets_inside_strings_do_not_count() -> None:
    body = b'{"text": "' + b"[" * 1000 + b'\\" [[["}'
    assert not json_depth_exceeds(body, 64)


def test_many_shallow_brackets_are_not_depth() -> None:
    assert not json_depth_exceeds(b"[" + b"[]," * 10_000 + b"[]]", 64)


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b'{"q": "a\\u0000b"}', "NUL"),
        (b'{"a\\u0000": 1}', "key"),
        (b'{"list": ["ok", {"deep": "\\ud83d"}]}', "body.list[1].deep"),
        (b'{"q": "caf\xe9"}', "UTF-8"),
        (b'{"q": "\xed\xa0\x80"}', "UTF-8"),  # a surrogate encoded as UTF-8 is not UTF-8
        (nested(100), "nested"),
    ],
)
def test_json_bodies_the_service_cannot_take_are_refused(body: bytes, says: str) -> None:
    with pytest.raises(InvalidText, match=says.replace("[", r"\[").replace("]", r"\]")):
        check_json_body(body, 64)


@pytest.mark.parametrize(
    "body",
    [
        b'{"q": "a\\\\u0000b"}',  # an escaped backslash, then the text u0000
        b'{"emoji": "\\ud83c\\udf89"}',  # a surrogate pair is one character
        b'{"q": "\\u00e9t\\u00e9"}',
        b"not json at all",  # left to the framework to answer
    ],
)
def test_json_bodies_the_service_can_take_pass(body: bytes) -> None:
    check_json_body(body, 64)


def test_a_nul_in_a_form_field_is_refused() -> None:
    with pytest.raises(InvalidText, match="NUL"):
        check_form_body(b"name=a%00b")


def test_a_form_that_is_not_utf8_is_refused() -> None:
    with pytest.raises(InvalidText, match="UTF-8"):
        check_form_body(b"name=caf%E9")


def test_a_plain_form_passes() -> None:
    check_form_body(b"grant_type=client_credentials&scope=a+b")


def test_openapi_declares_the_guard_everywhere_and_413_where_a_body_is_taken() -> None:
    error = {"content": {"application/json": {"schema": {"$ref": "#/E"}}}}
    document = {
        "paths": {
            "/things": {
                "post": {"responses": {"201": {"description": "made"}, "401": error}},
                "get": {"responses": {"200": {"description": "listed"}}},
            }
        }
    }
    documented = document_input_limits(
        document, validation_status=422, max_json_depth=64, max_body_bytes=1000
    )
    post = documented["paths"]["/things"]["post"]["responses"]
    assert post["413"] == {"description": "Request body larger than 1000 bytes", **error}
    assert "not UTF-8" in post["422"]["description"]
    assert post["422"]["content"] == error["content"]
    get = documented["paths"]["/things"]["get"]["responses"]
    assert set(get) == {"200", "422"}  # a NUL in any query string is refused
    assert "NUL" in get["422"]["description"]


def test_unstorable_text_is_found_anywhere_in_a_json_value_with_where_it_sits() -> None:
    assert bad_text_in({"filter": {"tags": ["ok", "a\x00"]}}, "variables") == (
        "variables.filter.tags[1] contains a NUL character (\\u0000)"
    )
    assert "(a key)" in (bad_text_in({"a\ud800": 1}, "variables") or "")
    assert bad_text_in(["\udfff"], "variables") is not None
    assert bad_text_in({"filter": {"search": "tea 🍵", "n": 1, "x": None}}, "variables") is None
    assert bad_text_in(None, "variables") is None


@pytest.mark.parametrize(
    ("body", "where"),
    [
        (b'{"limit": 1e400}', "body.limit"),
        (b'{"limit": -1E+400}', "body.limit"),
        (b'{"a": [1, {"b": 1' + b"0" * 400 + b".5}]}", "body.a[1].b"),
        (b'{"limit": NaN}', "body.limit"),
        (b'{"limit": Infinity}', "body.limit"),
        (b"[-Infinity]", "body[0]"),
        (b"1e999", "body"),
    ],
)
def test_a_json_number_no_float_holds_is_refused_naming_where_it_sits(
    body: bytes, where: str
) -> None:
    with pytest.raises(InvalidNumber) as refused:
        check_json_body(body, 64)
    assert refused.value.message.startswith(f"{where} is a number outside the range")


@pytest.mark.parametrize(
    "body",
    [
        b'{"limit": 1e308, "small": 1e-400, "e": "1e400", "NaN": "Infinity"}',
        b'{"big": 1' + b"0" * 400 + b"}",  # an integer: Python keeps it exact
        b'{"text": "' + b"9" * 400 + b'.5"}',
        b'{"x": 1e400',  # malformed: left to the framework to answer
    ],
)
def test_finite_numbers_and_numbers_inside_strings_pass(body: bytes) -> None:
    check_json_body(body, 64)


def test_finite_json_is_read_as_json_loads_reads_it() -> None:
    text = '{"a": [1, 2.5, -0.0, 1e-400, null, true, "Infinity"], "b": {"c": 10000000000000000}}'
    assert load_finite_json(text) == {
        "a": [1, 2.5, -0.0, 0.0, None, True, "Infinity"],
        "b": {"c": 10000000000000000},
    }


def test_non_finite_numbers_in_other_json_are_named_below_the_place_given() -> None:
    with pytest.raises(InvalidNumber, match=r"^variables\.first is a number"):
        load_finite_json('{"first": 1e400}', "variables")


def test_json_without_an_exponent_or_python_literal_is_not_parsed_for_numbers() -> None:
    # The `e` of `true` and `false` once sent nearly every body through a second parse.
    assert not may_hold_non_finite(b'{"active": true, "deleted": false, "events": ["*"]}')
    assert may_hold_non_finite(b'{"limit": 1e400}')
    assert may_hold_non_finite(b'{"limit": -Infinity}')
