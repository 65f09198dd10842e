"""What `expressions` relies on in cel-expr-python, through its adapter `cel_binding`: an
upgrade of the binding that changes any of it fails here (pure: no server)."""

from __future__ import annotations

import pytest
from webhook_hub import cel_binding


def test_a_syntax_error_carries_its_line_and_one_based_column() -> None:
    with pytest.raises(cel_binding.BindingError) as raised:
        cel_binding.compile_program("event.type ==\n  1 +* 2")
    assert (raised.value.line, raised.value.column) == (2, 6)
    assert "Syntax error" in raised.value.message


def test_an_unknown_variable_is_refused_by_the_checker_at_its_position() -> None:
    with pytest.raises(cel_binding.BindingError) as raised:
        cel_binding.compile_program("evnt.type == 'a'")
    assert (raised.value.line, raised.value.column) == (1, 5)
    assert "undeclared reference" in raised.value.message


def test_a_mistyped_operator_is_refused_by_the_checker() -> None:
    with pytest.raises(cel_binding.BindingError) as raised:
        cel_binding.compile_program('1 + "a"')
    assert (raised.value.line, raised.value.column) == (1, 3)
    assert "no matching overload" in raised.value.message


def test_the_checker_knows_a_boolean_result_and_leaves_a_field_of_event_dynamic() -> None:
    assert cel_binding.compile_program("event.type == 'a' && true").returns == "BOOL"
    assert cel_binding.compile_program("event.data.flag").returns == "DYN"
    assert cel_binding.compile_program("'a'").returns == "STRING"


def test_comprehensions_stop_after_ten_thousand_iterations_in_all() -> None:
    program = cel_binding.compile_program("event.data.exists(x, x < 0)")
    assert (
        cel_binding.unwrap(program.run(cel_binding.activation({"data": list(range(9_999))})))
        is False
    )
    nested = cel_binding.compile_program("event.data.exists(a, event.data.exists(b, a < 0))")
    with pytest.raises(cel_binding.BindingError, match="Iteration budget exceeded"):
        nested.run(cel_binding.activation({"data": list(range(101))}))


def test_a_failed_operation_on_an_event_is_an_error_not_a_value() -> None:
    program = cel_binding.compile_program("event.data.missing == 1")
    with pytest.raises(cel_binding.BindingError, match="Key not found"):
        program.run(cel_binding.activation({"data": {}}))
    with pytest.raises(cel_binding.BindingError, match="divide by zero"):
        cel_binding.compile_program("event.data / 0 == 1").run(cel_binding.activation({"data": 1}))


def test_a_result_unwraps_one_level_at_a_time() -> None:
    value = cel_binding.compile_program('{"a": [1, "b"], 2: null}').run(cel_binding.activation({}))
    assert cel_binding.kind_of(value) == "MAP"
    top = cel_binding.unwrap(value)
    assert set(top) == {"a", 2}
    inner = cel_binding.unwrap(top["a"])
    assert [cel_binding.unwrap(item) for item in inner] == [1, "b"]
    assert cel_binding.unwrap(top[2]) is None


def test_one_activation_serves_several_programs() -> None:
    bound = cel_binding.activation({"type": "order.paid", "data": {"total": 150}})
    first = cel_binding.compile_program("event.type == 'order.paid'")
    second = cel_binding.compile_program("event.data.total * 2")
    assert cel_binding.unwrap(first.run(bound)) is True
    assert cel_binding.unwrap(second.run(bound)) == 300
    assert cel_binding.unwrap(first.run(bound)) is True


def test_a_result_converts_at_once_to_plain_python() -> None:
    value = cel_binding.compile_program('{"a": [1, "b", b"x"], "d": duration("90s")}').run(
        cel_binding.activation({})
    )
    plain = cel_binding.plain(value)
    assert plain["a"][:2] == [1, "b"]
    assert bytes(plain["a"][2]) == b"x"
    assert plain["d"].total_seconds() == 90
