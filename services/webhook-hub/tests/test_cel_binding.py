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
    assert cel_binding.unwrap(program.run({"data": list(range(9_999))})) is False
    nested = cel_binding.compile_program("event.data.exists(a, event.data.exists(b, a < 0))")
    with pytest.raises(cel_binding.BindingError, match="Iteration budget exceeded"):
        nested.run({"data": list(range(101))})


def test_a_failed_operation_on_an_event_is_an_error_not_a_value() -> None:
    program = cel_binding.compile_program("event.data.missing == 1")
    with pytest.raises(cel_binding.BindingError, match="Key not found"):
        program.run({"data": {}})
    with pytest.raises(cel_binding.BindingError, match="divide by zero"):
        cel_binding.compile_program("event.data / 0 == 1").run({"data": 1})


def test_a_result_unwraps_one_level_at_a_time() -> None:
    value = cel_binding.compile_program('{"a": [1, "b"], 2: null}').run({})
    assert cel_binding.kind_of(value) == "MAP"
    top = cel_binding.unwrap(value)
    assert set(top) == {"a", 2}
    inner = cel_binding.unwrap(top["a"])
    assert [cel_binding.unwrap(item) for item in inner] == [1, "b"]
    assert cel_binding.unwrap(top[2]) is None
