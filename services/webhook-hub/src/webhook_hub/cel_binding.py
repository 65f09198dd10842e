"""The one place webhook-hub touches its CEL binding, `cel-expr-python` (Google's wrapper of
cel-cpp), chosen by measurement (README, "Filters and transformations").

What `expressions` relies on, each checked by tests/test_cel_binding.py so that an upgrade
that changes it fails there: the type checker refuses unknown names and mistyped operators
with `<input>:line:column:` in the message (1-based columns); a program's return type is
known after checking; evaluation stops a comprehension after 10,000 iterations in all
("Iteration budget exceeded"); a value converts to Python one level at a time.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cel_expr_python import cel  # type: ignore[import-untyped]

# The binding reports an error as "<input>:LINE:COLUMN: message\n | source\n | ...^".
_POSITION = re.compile(r"<input>:(\d+):(\d+): ([^\n]*)")

_ENV = cel.NewEnv(variables={"event": cel.Type.Map(cel.Type.STRING, cel.Type.DYN)})
# The runtime is built on the first evaluation (milliseconds): build it now, not on an event.
_ENV.compile("true").eval(data={"event": {}})


@dataclass(frozen=True)
class BindingError(Exception):
    """A compile or evaluation error of the binding, with its position when it gave one."""

    message: str
    line: int = 0
    column: int = 0


def _error_of(exc: Exception) -> BindingError:
    text = str(exc)
    found = _POSITION.search(text)
    if found is None:
        # Evaluation errors read "INTERNAL: <message> [INTERNAL]" (or another status).
        message = re.sub(r"^[A-Z_]+: |\s*\[[A-Z_]+\]$", "", text.strip())
        return BindingError(message or type(exc).__name__)
    return BindingError(found.group(3).strip(), int(found.group(1)), int(found.group(2)))


class Program:
    """A checked expression over the variable `event` (a map of string to any)."""

    __slots__ = ("_expression", "returns")

    def __init__(self, expression: Any) -> None:
        self._expression = expression
        # "BOOL", "DYN", "MAP", "STRING", ...: what the checker could decide.
        self.returns: str = str(expression.return_type().name())

    def run(self, event: Mapping[str, Any]) -> Any:
        """The result as the binding's value (see `to_python`); raises BindingError."""
        try:
            value = self._expression.eval(data={"event": event})
        except Exception as exc:
            raise _error_of(exc) from None
        # A failed operation (a missing key, a division by zero) comes back as a value of
        # type ERROR whose Python value is "STATUS: message".
        if value.type().name() == "ERROR":
            raise _error_of(RuntimeError(str(value.value())))
        return value


def compile_program(source: str) -> Program:
    """Parse and type-check; raises BindingError with the first error's position."""
    try:
        return Program(_ENV.compile(source))
    except Exception as exc:
        raise _error_of(exc) from None


def kind_of(value: Any) -> str:
    """The CEL type name of a result value, without parameters: BOOL, INT, UINT, DOUBLE,
    STRING, BYTES, NULL, LIST, MAP, TIMESTAMP, DURATION, TYPE, ..."""
    return str(value.type().name()).split("<", 1)[0]


def unwrap(value: Any) -> Any:
    """One level of a result: a scalar as Python (bool, int, float, str, bytes, None,
    datetime, timedelta), a list as a list of values, a map as a dict of Python keys to
    values."""
    return value.value()
