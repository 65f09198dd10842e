"""CEL filters, transforms and keys over an event: refused at compile time with the field
and position, bounded in cost and output, results as plain JSON (pure: no server)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from webhook_hub.expressions import (
    ACCUMULATING_LIST_MAX,
    MAX_OUTPUT_BYTES,
    MAX_SOURCE_CHARS,
    CompiledExpression,
    EventScope,
    ExpressionError,
    ExpressionRefused,
    Position,
    compile_expression,
    event_time_text,
    event_variable,
)


def an_event(**data: Any) -> dict[str, Any]:
    return event_variable(
        id="0b7f5f0e-1d1a-4c87-9a55-3c4f6b2d8e01",
        type="order.paid",
        tenant="t1",
        time="2026-11-29T06:00:00Z",
        source="commerce-content",
        data=data,
    )


def refusal(source: str, kind: str = "filter") -> ExpressionError:
    with pytest.raises(ExpressionError) as raised:
        compile_expression(source, field=kind, kind=kind)  # type: ignore[arg-type]
    return raised.value


def test_a_filter_over_type_and_data_decides_per_event() -> None:
    expression = compile_expression(
        'event.type == "order.paid" && event.data.total > 100', field="filter", kind="filter"
    )
    assert expression.matches(an_event(total=150)) is True
    assert expression.matches(an_event(total=50)) is False


def test_a_transform_builds_plain_json_from_the_event() -> None:
    expression = compile_expression(
        '{"order": event.data.order_id, "who": event.tenant, '
        '"skus": event.data.items.map(i, i.sku), "at": timestamp(event.time)}',
        field="transform",
        kind="transform",
    )
    result = expression.evaluate(an_event(order_id="o-1", items=[{"sku": "a"}, {"sku": "b"}]))
    assert result == {"order": "o-1", "who": "t1", "skus": ["a", "b"], "at": "2026-11-29T06:00:00Z"}


def test_a_syntax_error_is_refused_with_the_field_and_position() -> None:
    error = refusal('event.type ==\n  "a" &&')
    assert (error.field, error.position) == ("filter", Position(2, 9))
    assert error.status_code == 422


def test_an_unknown_variable_is_refused_where_it_stands() -> None:
    assert refusal('evnt.type == "a"').position == Position(1, 5)


def test_an_unknown_field_of_event_is_refused_where_it_stands() -> None:
    error = refusal('event.tpye == "a"')
    assert error.position == Position(1, 7)
    assert "tpye" in error.message


def test_a_field_name_inside_a_string_is_not_taken_for_one() -> None:
    assert compile_expression('event.type == "event.tpye"', field="filter", kind="filter")


def test_a_filter_that_cannot_be_boolean_is_refused() -> None:
    assert "boolean" in refusal('"order.paid"').message


def test_a_filter_of_dynamic_type_is_accepted_and_checked_per_event() -> None:
    expression = compile_expression("event.data.flag", field="filter", kind="filter")
    assert expression.matches(an_event(flag=True)) is True
    with pytest.raises(ExpressionRefused) as raised:
        expression.matches(an_event(flag="yes"))
    assert raised.value.reason == "type"


def test_a_type_error_is_refused_at_compile_time() -> None:
    assert refusal('event.type + 1 == "a"').field == "filter"


def test_a_source_longer_than_the_bound_is_refused() -> None:
    error = refusal("true || " * (MAX_SOURCE_CHARS // 8) + "true")
    assert "longer than" in error.message


def test_an_unclosed_string_is_refused_where_it_opens() -> None:
    assert refusal('event.type == "abc').position == Position(1, 15)


def test_a_list_building_macro_inside_another_macro_is_refused() -> None:
    error = refusal("event.data.a.map(x, event.data.b.map(y, y))", kind="transform")
    assert error.position == Position(1, 34)


def test_a_list_building_macro_over_a_computed_list_is_refused() -> None:
    error = refusal("(event.data.a + event.data.a).map(x, x)", kind="transform")
    assert "computed list" in error.message


def test_macros_nested_three_deep_are_refused() -> None:
    assert "nested" in refusal("event.data.a.exists(x, x.b.exists(y, y.c.exists(z, z)))").message


def test_chained_map_and_filter_over_an_event_list_are_accepted() -> None:
    expression = compile_expression(
        "event.data.items.filter(i, i.qty > 1).map(i, i.sku)", field="transform", kind="transform"
    )
    assert expression.evaluate(
        an_event(items=[{"sku": "a", "qty": 1}, {"sku": "b", "qty": 2}])
    ) == ["b"]


def test_a_list_building_macro_is_refused_an_event_with_a_list_past_the_bound() -> None:
    expression = compile_expression(
        "event.data.items.map(i, i)", field="transform", kind="transform"
    )
    assert len(expression.evaluate(an_event(items=list(range(ACCUMULATING_LIST_MAX))))) == 256  # type: ignore[arg-type]
    with pytest.raises(ExpressionRefused) as raised:
        expression.evaluate(an_event(items=list(range(ACCUMULATING_LIST_MAX + 1))))
    assert raised.value.reason == "cost"


def test_a_comprehension_past_the_iteration_budget_is_refused_as_cost() -> None:
    expression = compile_expression(
        "event.data.a.exists(x, event.data.a.exists(y, x + y < 0))", field="filter", kind="filter"
    )
    with pytest.raises(ExpressionRefused) as raised:
        expression.matches(an_event(a=list(range(200))))
    assert raised.value.reason == "cost"


def test_a_result_past_the_output_bound_is_refused() -> None:
    expression = compile_expression(
        "event.data.items.map(i, event.data.text)", field="transform", kind="transform"
    )
    with pytest.raises(ExpressionRefused) as raised:
        expression.evaluate(an_event(items=list(range(100)), text="x" * (MAX_OUTPUT_BYTES // 50)))
    assert raised.value.reason == "output"


def test_a_key_is_bounded_more_tightly_than_a_transform() -> None:
    expression = compile_expression("event.data.order_id", field="ordering.key", kind="key")
    assert expression.evaluate(an_event(order_id="o-1")) == "o-1"
    with pytest.raises(ExpressionRefused):
        expression.evaluate(an_event(order_id="o" * 1000))


def test_an_error_on_one_event_is_a_refusal_with_the_reason() -> None:
    expression = compile_expression("event.data.total > 1", field="filter", kind="filter")
    with pytest.raises(ExpressionRefused) as raised:
        expression.matches(an_event())
    assert raised.value.reason == "error"
    assert "total" in raised.value.message


def test_results_that_json_cannot_carry_are_converted_or_refused() -> None:
    expression = compile_expression(
        '{1: b"hi", false: duration("90s"), "n": 1u}', field="transform", kind="transform"
    )
    assert expression.evaluate(an_event()) == {"1": "aGk=", "false": "PT90S", "n": 1}
    with pytest.raises(ExpressionError):
        compile_expression("int", field="transform", kind="transform")
    with pytest.raises(ExpressionRefused) as raised:
        compile_expression("[int]", field="transform", kind="transform").evaluate(an_event())
    assert raised.value.reason == "output"


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
def test_any_source_compiles_or_is_refused_with_a_position(source: str) -> None:
    outcome: CompiledExpression | ExpressionError
    try:
        outcome = compile_expression(source, field="filter", kind="filter")
    except ExpressionError as error:
        outcome = error
    if isinstance(outcome, ExpressionError):
        assert outcome.position.line >= 1
        assert outcome.position.column >= 1
    else:
        assert outcome.source == source


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(JSON)
def test_any_event_data_gives_a_value_or_a_refusal(data: Any) -> None:
    expression = compile_expression(
        '{"d": event.data, "n": event.data.n}', field="transform", kind="transform"
    )
    event = event_variable(id="i", type="t", tenant=None, time="", data=data, source="s")
    outcome: object
    try:
        outcome = expression.evaluate(event)
    except ExpressionRefused as refused:
        outcome = refused
    if isinstance(outcome, ExpressionRefused):
        assert outcome.reason in ("error", "output")
    else:
        assert isinstance(outcome, dict)
        assert outcome["d"] == data


@pytest.mark.parametrize(
    "source",
    [
        '{"a": event.data.total, "when": timestamp(event.time), "d": duration("90s")}',
        '{"skus": event.data.items.map(i, i.sku), "n": 1u, 2: b"hi"}',
        "[double(event.data.total) * 1.5, null, true]",
    ],
)
def test_the_json_sent_is_the_json_evaluated_with_macros_or_without(source: str) -> None:
    expression = compile_expression(source, field="transform", kind="transform")
    event = an_event(total=3, items=[{"sku": "a"}])
    assert json.loads(expression.encode(event)) == expression.evaluate(event)


def test_one_scope_serves_every_expression_of_an_event() -> None:
    scope = EventScope(an_event(total=150))
    check = compile_expression("event.data.total > 100", field="filter", kind="filter")
    shape = compile_expression('{"t": event.data.total}', field="transform", kind="transform")
    assert check.matches(scope) is True
    assert shape.encode(scope) == b'{"t":150}'
    assert check.matches(scope) is True


def test_an_encoded_result_past_the_bound_is_refused() -> None:
    expression = compile_expression(
        "[event.data.text, event.data.text]", field="transform", kind="transform"
    )
    with pytest.raises(ExpressionRefused) as raised:
        expression.encode(an_event(text="x" * MAX_OUTPUT_BYTES))
    assert raised.value.reason == "output"


def test_two_slow_evaluations_in_a_row_trip_the_expression_for_a_while(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from webhook_hub import expressions

    expression = compile_expression("event.data.total > 1", field="filter", kind="filter")
    monkeypatch.setattr(expressions, "TRIP_SECONDS", -1.0)  # every evaluation counts as slow
    assert expression.matches(an_event(total=2)) is True
    assert expression.matches(an_event(total=2)) is True
    with pytest.raises(ExpressionRefused) as raised:
        expression.matches(an_event(total=2))
    assert raised.value.reason == "cost"
    assert "time bound" in raised.value.message


def test_one_slow_evaluation_alone_does_not_trip_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from webhook_hub import expressions

    expression = compile_expression("event.data.total > 1", field="filter", kind="filter")
    monkeypatch.setattr(expressions, "TRIP_SECONDS", -1.0)
    assert expression.matches(an_event(total=2)) is True
    monkeypatch.setattr(expressions, "TRIP_SECONDS", 60.0)
    assert expression.matches(an_event(total=2)) is True
    monkeypatch.setattr(expressions, "TRIP_SECONDS", -1.0)
    assert expression.matches(an_event(total=2)) is True


def test_a_loop_whose_body_touches_a_large_value_is_refused_before_it_runs() -> None:
    expression = compile_expression(
        "event.data.a.exists(x, event.data.s + event.data.s == '')", field="filter", kind="filter"
    )
    assert expression.matches(an_event(a=[0] * 10, s="x" * 100)) is False
    with pytest.raises(ExpressionRefused) as raised:
        expression.matches(an_event(a=[0] * 2_000, s="x" * 100_000))
    assert raised.value.reason == "cost"
    assert "cost bound" in raised.value.message


def test_the_loop_cost_counts_a_list_literal_as_long_as_the_source_allows() -> None:
    expression = compile_expression(
        "[1, 2, 3].exists(x, event.data.s + event.data.s == '')", field="filter", kind="filter"
    )
    assert expression.shape.literal_items >= 3
    assert expression.matches(an_event(s="x" * 100)) is False


def test_an_expression_without_loops_or_joins_has_no_cost_check() -> None:
    expression = compile_expression('event.data.s == ""', field="filter", kind="filter")
    assert (expression.shape.macros, expression.shape.joins) == (0, 0)
    assert expression.matches(an_event(s="x" * 200_000)) is False


def test_a_chain_of_joins_over_a_large_value_is_refused_before_it_runs() -> None:
    chain = "event.data.s" + " + event.data.s" * 28 + ' == ""'
    expression = compile_expression(chain, field="filter", kind="filter")
    assert expression.matches(an_event(s="x" * 100)) is False
    with pytest.raises(ExpressionRefused) as raised:
        expression.matches(an_event(s="x" * 150_000))
    assert raised.value.reason == "cost"


def test_an_expression_nested_past_the_parsers_depth_is_refused_at_line_1_column_1() -> None:
    error = refusal("event.data.s" + " + event.data.s" * 40 + ' == ""')
    assert error.position == Position(1, 1)
    assert error.message.startswith("Exceeded max recursion depth")


def test_event_time_is_rfc3339_text_with_z_for_utc_and_the_offset_otherwise() -> None:
    at = datetime(2026, 11, 29, 8, 30, 5, 120000, tzinfo=UTC)
    assert event_time_text(at) == "2026-11-29T08:30:05.120000Z"
    plus_one = at.astimezone(timezone(timedelta(hours=1)))
    assert event_time_text(plus_one) == "2026-11-29T09:30:05.120000+01:00"
