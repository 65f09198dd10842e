"""CEL expressions over an event: a subscription's `filter` and `transform`, and an ordering
`key`. Compiled (parsed and type-checked) once when saved, evaluated per event.

Total: any source in, a `CompiledExpression` or an `ExpressionError` (422, naming the field
and the 1-based line and column) out; any event in, a plain JSON value or an
`ExpressionRefused` out. Nothing else of webhook_hub is imported here; the binding is
reached only through `cel_binding`.

Cost is bounded without a timer the worker would have to trust (the binding holds the GIL
while it evaluates, so a slow evaluation would stall the event loop however it is run in
process):

- the source is at most `MAX_SOURCE_CHARS`, and the binding stops comprehensions after
  10,000 iterations in all per evaluation;
- the macros that build lists (`map`, `filter`) copy their list at each step in the binding
  (measured: quadratic), so they may only stand at the top level (not inside another
  macro), over a path into the event or a loop variable (not over a computed list), at most
  `MAX_MACROS` macros and `MAX_NESTING` deep, and an expression using them is refused an
  event whose data holds a list longer than `ACCUMULATING_LIST_MAX`;
- a loop's body may touch the event's largest value at each iteration, so an expression
  with macros is refused, per event, when its iterations x the event's size x the names its
  bodies use pass `LOOP_COST_MAX` (checked before evaluating, from the event's longest list
  and size, computed once per event);
- no extension library is loaded (no string `replace`, no `repeat`: nothing that grows a
  value beyond the sum of what the expression names); regular expressions are RE2 (linear);
- two evaluations in a row that still take longer than `TRIP_SECONDS` trip the expression:
  it is refused for `TRIPPED_FOR_SECONDS` after, so one costly expression cannot stall
  every event.

Output is bounded too: a result is converted to JSON one value at a time against
`MAX_OUTPUT_BYTES` (`MAX_KEY_BYTES` for a key), so a result that would be huge is refused
before it is built.
"""

from __future__ import annotations

import base64
import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

import msgspec

from webhook_hub import cel_binding

Kind = Literal["filter", "transform", "key"]
JsonValue = None | bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"]

MAX_SOURCE_CHARS = 2_000
MAX_MACROS = 8
MAX_NESTING = 2
ACCUMULATING_LIST_MAX = 256
MAX_OUTPUT_BYTES = 64 * 1024
MAX_KEY_BYTES = 256
TRIP_SECONDS = 0.05
# The binding's comprehension budget (tests/test_cel_binding.py checks it).
ITERATION_BUDGET = 10_000
# What an expression's loops may cost on one event: iterations (at most the budget, at most
# the longest list to the power of the nesting) x the event's data in bytes x the names the
# loop bodies use. A body that copies or scans the event's largest value at each iteration
# costs about this in bytes moved: measured at 0.73 ns a unit at worst (a body concatenating
# the event's largest string three times), so at most about 40 ms an evaluation.
LOOP_COST_MAX = 50_000_000
TRIPPED_FOR_SECONDS = 60.0

EVENT_FIELDS = ("id", "type", "tenant", "time", "data", "source")
_MACROS = re.compile(r"\.\s*(all|exists_one|exists|map|filter)\s*\(")
_ACCUMULATING = frozenset({"map", "filter"})
_EVENT_FIELD = re.compile(r"(?<![\w.])event\s*\.\s*([A-Za-z_]\w*)")
_IDENT_CHAR = re.compile(r"\w")
_NAME = re.compile(r"(?<![\w.])[A-Za-z_]\w*|(?<=\.)[A-Za-z_]\w*")


@dataclass(frozen=True)
class Position:
    line: int
    column: int


class ExpressionError(Exception):
    """An expression refused when saved: 422 naming the field and where in the source."""

    status_code = 422

    def __init__(self, field: str, position: Position, message: str) -> None:
        super().__init__(f"{field}: {message} (line {position.line}, column {position.column})")
        self.field = field
        self.position = position
        self.message = message

    def detail(self) -> dict[str, Any]:
        return {
            "field": self.field,
            "line": self.position.line,
            "column": self.position.column,
            "message": self.message,
        }


Refusal = Literal["error", "type", "cost", "output"]


class ExpressionRefused(Exception):
    """An evaluation that gave no usable value: `reason` says why (an error of the
    expression on this event, a result of the wrong type, its cost bound, its output
    bound)."""

    def __init__(self, field: str, reason: Refusal, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.reason = reason
        self.message = message


def event_time_text(time: datetime) -> str:
    """`event.time` as expressions see it: RFC 3339, a UTC time with `Z` (as CloudEvents
    publishers write it), the same for filters, transforms and ordering keys."""
    return time.isoformat().replace("+00:00", "Z")


def event_variable(
    *,
    id: str,
    type: str,
    tenant: str | None,
    time: str,
    data: Any,
    source: str,
) -> dict[str, Any]:
    """The variable `event` expressions see (`time` as RFC 3339 text, `data` as parsed JSON)."""
    return {"id": id, "type": type, "tenant": tenant, "time": time, "data": data, "source": source}


class EventScope:
    """One event as expressions see it, prepared once and shared by all the expressions
    evaluated on it (dispatch makes one per event, for the subscriptions that have any).
    `size`: its data's length as JSON, when the caller has it (dispatch has the bytes)."""

    __slots__ = ("_activation", "_longest", "_size", "event")

    def __init__(self, event: Mapping[str, Any], size: int | None = None) -> None:
        self.event = event
        self._activation: Any = None
        self._longest: int | None = None
        self._size = size

    @property
    def activation(self) -> Any:
        if self._activation is None:
            self._activation = cel_binding.activation(self.event)
        return self._activation

    def longest_list(self) -> int:
        """The length of the longest list in the event's data (for looping expressions)."""
        if self._longest is None:
            self._longest = _longest_list(self.event.get("data"))
        return self._longest

    def size(self) -> int:
        if self._size is None:
            try:
                self._size = len(msgspec.json.encode(self.event.get("data")))
            except Exception:  # not JSON (a caller's mapping): measured as its text
                self._size = len(str(self.event.get("data")))
        return self._size


Scope = Mapping[str, Any] | EventScope


class CompiledExpression:
    """A checked expression; `evaluate` is safe to call per event."""

    __slots__ = (
        "_limit",
        "_program",
        "_slow",
        "_tripped_until",
        "accumulating",
        "field",
        "kind",
        "looping",
        "shape",
        "source",
    )

    def __init__(
        self,
        source: str,
        field: str,
        kind: Kind,
        program: cel_binding.Program,
        shape: Shape,
    ) -> None:
        self.source = source
        self.field = field
        self.kind = kind
        self.shape = shape
        # Whether it has comprehension macros at all, and ones that build lists.
        self.looping = shape.macros > 0
        self.accumulating = shape.accumulating
        self._program = program
        self._limit = MAX_KEY_BYTES if kind == "key" else MAX_OUTPUT_BYTES
        self._tripped_until = 0.0
        self._slow = 0

    def _run(self, event: Scope) -> Any:
        scope = event if isinstance(event, EventScope) else EventScope(event)
        if self._tripped_until:
            if time.monotonic() < self._tripped_until:
                raise ExpressionRefused(
                    self.field, "cost", "refused for a while: it exceeded its time bound"
                )
            self._tripped_until = 0.0
        if self.looping:
            self._check_loop_cost(scope)
        elif self.shape.joins and scope.size() * self.shape.names * (self.shape.joins + 1) > (
            LOOP_COST_MAX
        ):
            raise ExpressionRefused(
                self.field,
                "cost",
                f"joins values of an event of {scope.size()} bytes {self.shape.joins} times: "
                f"past its cost bound",
            )
        started = time.perf_counter()
        try:
            value = self._program.run(scope.activation)
        except cel_binding.BindingError as exc:
            cost = "budget" in exc.message.lower()
            raise ExpressionRefused(self.field, "cost" if cost else "error", exc.message) from None
        finally:
            # Wall time (a CPU clock costs 1 µs a read here): a slow evaluation counts only
            # when the one before was slow too, so a worker merely preempted is not tripped.
            if time.perf_counter() - started > TRIP_SECONDS:
                self._slow += 1
                if self._slow >= 2:
                    self._tripped_until = time.monotonic() + TRIPPED_FOR_SECONDS
                    self._slow = 0
            elif self._slow:
                self._slow = 0
        return value

    def _check_loop_cost(self, scope: EventScope) -> None:
        """Refuse, before evaluating, an event on which this expression's loops could cost
        more than the bound (see `LOOP_COST_MAX`)."""
        longest = scope.longest_list()
        if self.accumulating and longest > ACCUMULATING_LIST_MAX:
            raise ExpressionRefused(
                self.field,
                "cost",
                f"uses map or filter and the event holds a list longer than "
                f"{ACCUMULATING_LIST_MAX} items",
            )
        lists = max(longest, self.shape.literal_items, 1)
        iterations = min(ITERATION_BUDGET, lists**self.shape.depth)
        if iterations * scope.size() * self.shape.weight > LOOP_COST_MAX:
            raise ExpressionRefused(
                self.field,
                "cost",
                f"loops over lists of up to {lists} items in an event of {scope.size()} "
                f"bytes: past its cost bound",
            )

    def evaluate(self, event: Scope) -> JsonValue:
        """The result as plain JSON; raises ExpressionRefused."""
        value = self._run(event)
        try:
            return _to_json(value, [self._limit], self.field, 0)
        except ExpressionRefused:
            raise
        except Exception as exc:  # the binding's conversion: still a refusal, never a raise
            raise ExpressionRefused(self.field, "output", type(exc).__name__) from None

    def encode(self, event: Scope) -> bytes:
        """The result as JSON text (what a transform sends); raises ExpressionRefused.

        Without comprehension macros a result holds at most what the expression names (its
        source is bounded), so it is converted at once and measured after (0.3 µs against
        2.4 one value at a time); with them, value by value against the bound."""
        value = self._run(event)
        if not self.looping:
            encoded = _encoded_at_once(value)
            if encoded is not None:
                if len(encoded) > self._limit:
                    raise ExpressionRefused(
                        self.field, "output", "the result is larger than its bound"
                    )
                return encoded
        try:
            return msgspec.json.encode(_to_json(value, [self._limit], self.field, 0))
        except ExpressionRefused:
            raise
        except Exception as exc:
            raise ExpressionRefused(self.field, "output", type(exc).__name__) from None

    def matches(self, event: Scope) -> bool:
        """A filter's verdict; raises ExpressionRefused (also when the result is not a bool)."""
        result = cel_binding.unwrap(self._run(event))
        if result is True or result is False:
            return result
        raise ExpressionRefused(self.field, "type", "a filter must give true or false")


def _encoded_at_once(value: Any) -> bytes | None:
    """A result as JSON in one go, or None when it holds a key or value JSON has no form
    for: the value-by-value conversion then says which."""
    try:
        return msgspec.json.encode(cel_binding.plain(value))
    except Exception:
        return None


def compile_expression(source: str, *, field: str, kind: Kind) -> CompiledExpression:
    """Parse and type-check `source`; raises ExpressionError naming `field` and where."""
    if not isinstance(source, str):
        raise ExpressionError(field, Position(1, 1), "an expression must be a string")
    if not source.strip():
        raise ExpressionError(field, Position(1, 1), "the expression is empty")
    if len(source) > MAX_SOURCE_CHARS:
        raise ExpressionError(
            field,
            _position(source, MAX_SOURCE_CHARS),
            f"the expression is longer than {MAX_SOURCE_CHARS} characters",
        )
    try:
        skeleton = _skeleton(source)
    except _Unclosed as exc:
        raise ExpressionError(field, _position(source, exc.at), "unclosed string") from None
    try:
        program = cel_binding.compile_program(source)
    except cel_binding.BindingError as exc:
        raise ExpressionError(
            field, Position(max(exc.line, 1), max(exc.column, 1)), exc.message
        ) from None
    for found in _EVENT_FIELD.finditer(skeleton):
        if found.group(1) not in EVENT_FIELDS:
            raise ExpressionError(
                field,
                _position(source, found.start(1)),
                f"event has no field '{found.group(1)}' (it has {', '.join(EVENT_FIELDS)})",
            )
    shape = _check_macros(source, skeleton, field)
    returns = program.returns.split("<", 1)[0]
    if kind == "filter" and returns not in ("BOOL", "DYN"):
        raise ExpressionError(
            field,
            Position(1, 1),
            f"a filter must be a boolean expression; this one gives {program.returns.lower()}",
        )
    if kind != "filter" and returns in ("TYPE", "ERROR"):
        raise ExpressionError(field, Position(1, 1), f"gives a {returns.lower()}, not a value")
    return CompiledExpression(source, field, kind, program, shape)


# --- the lexical checks -----------------------------------------------------------------


class _Unclosed(Exception):
    def __init__(self, at: int) -> None:
        self.at = at


def _skeleton(source: str) -> str:
    """`source` with the insides of string literals and comments blanked (same length, so
    indexes stay positions): what is left are the expression's own tokens."""
    out = list(source)
    i, n = 0, len(source)
    while i < n:
        char = source[i]
        if char == "/" and source.startswith("//", i):
            end = source.find("\n", i)
            end = n if end < 0 else end
            out[i:end] = " " * (end - i)
            i = end
            continue
        if char in "'\"":
            raw = "r" in _string_prefix(source, i).lower()
            quote = source[i : i + 3] if source.startswith(char * 3, i) else char
            j = i + len(quote)
            while True:
                if j >= n:
                    raise _Unclosed(i)
                if not raw and source[j] == "\\":
                    j += 2
                    continue
                if source.startswith(quote, j):
                    break
                if len(quote) == 1 and source[j] == "\n":
                    raise _Unclosed(i)
                j += 1
            for k in range(i + len(quote), j):
                if out[k] != "\n":
                    out[k] = " "
            i = j + len(quote)
            continue
        i += 1
    return "".join(out)


def _string_prefix(source: str, quote_at: int) -> str:
    """The `r`, `b`, `rb` or `br` standing right before a quote (not ending a name)."""
    start = quote_at
    while start > 0 and quote_at - start < 2 and source[start - 1] in "rRbB":
        start -= 1
    if start > 0 and _IDENT_CHAR.match(source[start - 1]):
        return ""
    return source[start:quote_at]


def _closing(skeleton: str, open_at: int) -> int:
    """The index of the bracket closing the one at `open_at` (or the end)."""
    opening = skeleton[open_at]
    closing = {"(": ")", "[": "]", "{": "}"}[opening]
    depth = 0
    for i in range(open_at, len(skeleton)):
        if skeleton[i] == opening:
            depth += 1
        elif skeleton[i] == closing:
            depth -= 1
            if depth == 0:
                return i
    return len(skeleton)


def _opening(skeleton: str, close_at: int) -> int:
    """The index of the bracket opening the one at `close_at` (or -1)."""
    closing = skeleton[close_at]
    opening = {")": "(", "]": "[", "}": "{"}[closing]
    depth = 0
    for i in range(close_at, -1, -1):
        if skeleton[i] == closing:
            depth += 1
        elif skeleton[i] == opening:
            depth -= 1
            if depth == 0:
                return i
    return -1


@dataclass(frozen=True)
class Shape:
    """What bounds the cost of an expression's loops: how many comprehension macros, how
    deep they nest, whether one builds a list, how many names their bodies use (each may
    stand for a value as large as the event), and the most items a list literal could hold."""

    macros: int = 0
    depth: int = 0
    accumulating: bool = False
    weight: int = 1
    literal_items: int = 0
    # Concatenations (`+`) and the names of the whole expression: a chain of `+` over the
    # event's largest string copies it once per step (measured: 138 ms for 128 of them
    # over 150 KB, without any loop).
    joins: int = 0
    names: int = 0


def _check_macros(source: str, skeleton: str, field: str) -> Shape:
    """Refuse the macro shapes whose cost is not bounded; the shape of the others."""
    macros = [
        (found.start(), found.start(1), found.group(1), found.end() - 1)
        for found in _MACROS.finditer(skeleton)
    ]
    if len(macros) > MAX_MACROS:
        raise ExpressionError(
            field,
            _position(source, macros[MAX_MACROS][1]),
            f"more than {MAX_MACROS} comprehension macros",
        )
    spans = [(open_at, _closing(skeleton, open_at)) for *_, open_at in macros]
    opens = {open_at: name for _, _, name, open_at in macros}
    accumulating = False
    deepest = 0
    for dot, name_at, name, _ in macros:
        depth = 1 + sum(1 for start, end in spans if start < dot < end)
        deepest = max(deepest, depth)
        where = _position(source, name_at)
        if depth > MAX_NESTING:
            raise ExpressionError(
                field, where, f"comprehension macros nested more than {MAX_NESTING} deep"
            )
        if name not in _ACCUMULATING:
            continue
        accumulating = True
        if depth > 1:
            raise ExpressionError(
                field,
                where,
                f"'{name}' builds a list, so it may not stand inside another macro",
            )
        if not _plain_receiver(skeleton, dot, opens):
            raise ExpressionError(
                field,
                where,
                f"'{name}' must apply to a list in the event (a path such as "
                f"event.data.items) or to another map or filter, not to a computed list",
            )
    joins = skeleton.count("+")
    names = sum(1 for _ in _NAME.finditer(skeleton))
    if not macros:
        return Shape(joins=joins, names=names)
    inside = [False] * len(skeleton)
    for start, end in spans:
        inside[start:end] = [True] * (end - start)
    weight = sum(1 for found in _NAME.finditer(skeleton) if inside[found.start()])
    return Shape(
        macros=len(macros),
        depth=deepest,
        accumulating=accumulating,
        weight=max(weight, 1),
        literal_items=skeleton.count(",") + 1,
        joins=joins,
        names=names,
    )


def _plain_receiver(skeleton: str, dot: int, opens: Mapping[int, str]) -> bool:
    """Whether what stands before `.map(` is a path from an identifier (`event.data.items`,
    `x.lines`, `event.data["items"]`) or a map/filter's own result."""
    j = dot - 1
    while j >= 0 and skeleton[j].isspace():
        j -= 1
    if j >= 0 and skeleton[j] == ")":
        start = _opening(skeleton, j)
        return opens.get(start) in _ACCUMULATING
    root_found = False
    while j >= 0:
        if skeleton[j] == "]":
            j = _opening(skeleton, j) - 1
            root_found = False
        elif _IDENT_CHAR.match(skeleton[j]):
            while j >= 0 and _IDENT_CHAR.match(skeleton[j]):
                j -= 1
            root_found = True
        else:
            return False
        while j >= 0 and skeleton[j].isspace():
            j -= 1
        if j >= 0 and skeleton[j] == ".":
            j -= 1
            while j >= 0 and skeleton[j].isspace():
                j -= 1
            continue
        if j >= 0 and skeleton[j] in "[":
            # An index's bracket: what stands before it is the rest of the path.
            return False
        return root_found and not skeleton[j + 1].isdigit()
    return root_found


def _position(source: str, index: int) -> Position:
    before = source[:index]
    line = before.count("\n") + 1
    return Position(line, index - (before.rfind("\n") + 1) + 1)


# --- evaluation helpers ------------------------------------------------------------------


def _longest_list(value: Any) -> int:
    """The length of the longest list in `value`."""
    longest = 0
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, list):
            longest = max(longest, len(item))
            pending.extend(child for child in item if isinstance(child, list | dict))
        elif isinstance(item, dict):
            pending.extend(child for child in item.values() if isinstance(child, list | dict))
    return longest


def _spend(budget: list[int], cost: int, field: str) -> None:
    budget[0] -= cost
    if budget[0] < 0:
        raise ExpressionRefused(field, "output", "the result is larger than its bound")


def _to_json(value: Any, budget: list[int], field: str, depth: int) -> JsonValue:
    """A binding value as plain JSON, spending `budget` (bytes, roughly as serialised)."""
    if depth > 64:
        raise ExpressionRefused(field, "output", "the result is nested too deep")
    plain = cel_binding.unwrap(value)
    if plain is None or plain is True or plain is False:
        _spend(budget, 5, field)
        return plain
    if isinstance(plain, str):
        _spend(budget, len(plain) + 2, field)
        return plain
    if isinstance(plain, int):
        _spend(budget, 20, field)
        return plain
    if isinstance(plain, float):
        _spend(budget, 24, field)
        # As msgspec writes them when a result is converted at once (`encode`).
        return plain if math.isfinite(plain) else None
    if isinstance(plain, list):
        _spend(budget, 2, field)
        return [_to_json(item, budget, field, depth + 1) for item in plain]
    if isinstance(plain, dict):
        _spend(budget, 2, field)
        out: dict[str, JsonValue] = {}
        for key, item in plain.items():
            name = _key_text(key)
            _spend(budget, len(name) + 4, field)
            out[name] = _to_json(item, budget, field, depth + 1)
        return out
    if isinstance(plain, datetime):
        _spend(budget, 32, field)
        return plain.isoformat().replace("+00:00", "Z")
    if isinstance(plain, timedelta):
        _spend(budget, 24, field)
        text: str = msgspec.json.decode(msgspec.json.encode(plain))  # ISO 8601, as `encode`
        return text
    if isinstance(plain, bytes | bytearray):
        _spend(budget, len(plain) * 4 // 3 + 4, field)
        return base64.b64encode(bytes(plain)).decode("ascii")
    raise ExpressionRefused(
        field, "output", f"the result holds a {cel_binding.kind_of(value).lower()}, not JSON"
    )


def _key_text(key: Any) -> str:
    if isinstance(key, str):
        return key
    if key is True or key is False:
        return "true" if key else "false"
    return str(key)
