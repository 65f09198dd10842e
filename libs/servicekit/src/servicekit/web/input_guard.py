"""One guard for text no service can store: NUL characters and lone UTF-16 surrogates (PostgreSQL
refuses both, so they surfaced as 500s), JSON nested deeper than a service ever needs (Python's
parser recurses, so 20,000 levels were a RecursionError), numbers no float holds (`1e400` was
read as `inf`, which neither PostgreSQL's `json` nor a JSON response can carry; Python's
parser also takes `NaN` and `Infinity`, which are not JSON) and bodies that are not UTF-8.

It looks at what reaches a service as data before the framework parses it: the path (and so
path parameters), the query string, header values, and JSON and URL-encoded form bodies, keys
included. A request that fails is answered with the service's validation status and envelope,
and the app never sees it, so nothing is changed.
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import parse_qsl, unquote

from fastapi import Request
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from servicekit.errors import PayloadTooLarge, UnprocessableEntity
from servicekit.web.errors import ErrorRenderer

DEFAULT_MAX_JSON_DEPTH = 64
_METHODS_WITH_BODIES = frozenset({"POST", "PUT", "PATCH"})

# A JSON string (with its escapes) as one token, so brackets inside strings are not counted.
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_ALL_BYTES = bytes(range(256))
_NOT_BRACKETS = bytes(b for b in _ALL_BYTES if b not in b"[]{}")
_SURROGATES = re.compile("[\ud800-\udfff]")
# Outside strings, what may hide a number no float holds: an exponent (after a digit: the `e`
# of `true` and `false` is none), a run of digits near float's 309, or Python's `NaN` /
# `Infinity`, which its parser takes although JSON has neither.
_MAYBE_NON_FINITE = re.compile(rb"[0-9][eE]|NaN|Infinity|[0-9]{300}")


class InvalidText(UnprocessableEntity):
    """Input the service cannot take as text; `where` names the part of the request."""


def bad_text_reason(value: str) -> str | None:
    """Why `value` cannot be stored as text, or None when it can."""
    if "\x00" in value:
        return "contains a NUL character (\\u0000)"
    if _SURROGATES.search(value):
        return "contains a lone UTF-16 surrogate"
    return None


def json_depth_exceeds(body: bytes, limit: int) -> bool:
    """Whether the JSON text nests arrays and objects deeper than `limit`, found without
    parsing (so without recursion): strings are cut out, the brackets left are counted."""
    if body.count(b"[") + body.count(b"{") <= limit:
        # Too few openings to pass the limit, strings included: the common case, in C.
        return False
    brackets = _JSON_STRING.sub(b"", body).translate(None, _NOT_BRACKETS)
    depth = 0
    for byte in brackets:
        if byte in b"[{":  # iterating bytes yields ints; `in` on bytes accepts them
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


def _strings(value: Any, where: str) -> Iterator[tuple[str, str]]:
    """Every string of a parsed JSON value, keys included, with where it sits (iteratively)."""
    stack: list[tuple[Any, str]] = [(value, where)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            yield item, path
        elif isinstance(item, dict):
            for key, child in item.items():
                yield key, f"{path} (a key)"
                stack.append((child, f"{path}.{key}"))
        elif isinstance(item, list):
            stack.extend((child, f"{path}[{index}]") for index, child in enumerate(item))


def bad_text_in(value: Any, where: str) -> str | None:
    """Where and why a parsed JSON value holds text no service can store, or None; for
    JSON the guard cannot see as such (GraphQL's query-string variables, say)."""
    for text, path in _strings(value, where):
        if reason := bad_text_reason(text):
            return f"{path} {reason}"
    return None


class _NonFinite:
    """A number as written that no float holds, in place of the `inf` or `nan` it would be."""

    def __init__(self, text: str) -> None:
        self.text = text


def _finite_or_marked(text: str) -> float | _NonFinite:
    number = float(text)
    return number if math.isfinite(number) else _NonFinite(text)


def load_finite_json(text: str | bytes, where: str = "body") -> Any:
    """JSON parsed as `json.loads` does, except that a number no float holds (`1e400`) and
    Python's extensions `NaN`, `Infinity` and `-Infinity` are refused (`InvalidNumber`, a
    ValueError naming where the number sits, below `where`) instead of read as `inf` or
    `nan`. Malformed JSON raises json's ValueError, as `json.loads` does."""
    parsed = json.loads(text, parse_float=_finite_or_marked, parse_constant=_NonFinite)
    if reason := non_finite_in(parsed, where):
        raise InvalidNumber(reason)
    return parsed


class InvalidNumber(InvalidText, ValueError):
    """A JSON number no float holds (or not JSON's: `NaN`, `Infinity`)."""


def non_finite_in(value: Any, where: str) -> str | None:
    """Where a parsed JSON value holds a number no float holds (an `inf` or `nan` already
    read, or one `load_finite_json` marked), or None (iteratively, as `_strings`)."""
    stack: list[tuple[Any, str]] = [(value, where)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, _NonFinite):
            shown = item.text if len(item.text) <= 20 else f"{item.text[:17]}..."
            return f"{path} is a number outside the range of a 64-bit float ({shown})"
        if isinstance(item, float) and not math.isfinite(item):
            return f"{path} is a number outside the range of a 64-bit float ({item})"
        if isinstance(item, dict):
            stack.extend((child, f"{path}.{key}") for key, child in item.items())
        elif isinstance(item, list):
            stack.extend((child, f"{path}[{index}]") for index, child in enumerate(item))
    return None


def may_hold_non_finite(body: bytes) -> bool:
    """Whether a JSON text may hold a number no float holds, found without parsing: strings
    are cut out, and what is left has no exponent, no long run of digits and no capital."""
    return _MAYBE_NON_FINITE.search(_JSON_STRING.sub(b'""', body)) is not None


def check_json_body(body: bytes, max_depth: int) -> None:
    """Raise `InvalidText` for a JSON body the service cannot take. Malformed JSON is left to
    the framework, which answers it in its own words."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidText(f"The request body is not UTF-8 (byte {exc.start})") from exc
    if json_depth_exceeds(body, max_depth):
        raise InvalidText(f"The JSON body is nested deeper than {max_depth} levels")
    if may_hold_non_finite(body):
        # Rare (an exponent outside strings): parsed once more, only to find such a number.
        try:
            load_finite_json(text)
        except InvalidNumber:
            raise
        except ValueError:
            pass  # malformed: the framework's to answer
    # Valid UTF-8 holds neither NUL as an escape nor a surrogate unless JSON escapes it:
    # without a `\u`, there is nothing to look for (the common case costs one search).
    if "\\u" not in text:
        return
    try:
        parsed = json.loads(text)
    except ValueError:
        return
    if reason := bad_text_in(parsed, "body"):
        raise InvalidText(reason)


def check_form_body(body: bytes) -> None:
    try:
        fields = parse_qsl(body.decode("utf-8"), keep_blank_values=True, errors="strict")
    except UnicodeDecodeError as exc:
        raise InvalidText(f"The request body is not UTF-8 (byte {exc.start})") from exc
    for name, value in fields:
        for text in (name, value):
            if reason := bad_text_reason(text):
                raise InvalidText(f"form field {name!r} {reason}")


def check_request_line_and_headers(scope: Scope) -> None:
    if reason := bad_text_reason(scope["path"]):
        raise InvalidText(f"The path {reason}")
    # Percent-escapes are decoded as the framework will (UTF-8, bad bytes replaced), so `%00`
    # is found; a surrogate cannot come this way.
    query = scope.get("query_string", b"")
    if query and (reason := bad_text_reason(unquote(query.decode("latin-1")))):
        raise InvalidText(f"The query string {reason}")
    for name, value in scope["headers"]:
        if b"\x00" in value:
            raise InvalidText(f"Header {name.decode('latin-1')} contains a NUL character")


def _body_kind(scope: Scope) -> str | None:
    """How the guard reads a body: as a form, as JSON, or not at all (multipart streams
    through). A body under any other label, or none, is read as JSON when the method carries
    one: some endpoints parse JSON whatever the label (raw payment notifications, GraphQL,
    contact), so the label is the client's word, not a promise."""
    for name, value in scope["headers"]:
        if name == b"content-type":
            media_type = value.split(b";", 1)[0].strip().lower()
            if media_type == b"application/x-www-form-urlencoded":
                return "form"
            if media_type.startswith(b"multipart/"):
                return None
            if media_type == b"application/json" or media_type.endswith(b"+json"):
                return "json"
            break
    return "json" if scope["method"] in _METHODS_WITH_BODIES else None


class InputGuardMiddleware:
    """Refuse requests carrying text the service cannot store (see the module's docstring).

    JSON and form bodies are read whole before the app runs (the body size limit, outside this
    guard, bounds them) and handed to the app unchanged; other bodies stream through.
    """

    def __init__(
        self,
        app: ASGIApp,
        render: ErrorRenderer,
        status: int = 422,
        max_json_depth: int = DEFAULT_MAX_JSON_DEPTH,
    ) -> None:
        self.app = app
        self.render = render
        self.status = status
        self.max_json_depth = max_json_depth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            check_request_line_and_headers(scope)
        except InvalidText as error:
            await self._refuse(error, scope, send)
            return
        kind = _body_kind(scope)
        if kind is None:
            await self.app(scope, receive, send)
            return
        try:
            body = await _read_body(receive)
        except PayloadTooLarge:
            # The size limit outside answers 413 itself once this returns.
            return
        check: Callable[[bytes], None] = (
            (lambda raw: check_json_body(raw, self.max_json_depth))
            if kind == "json"
            else check_form_body
        )
        try:
            check(body)
        except InvalidText as error:
            await self._refuse(error, scope, send)
            return
        await self.app(scope, _replay(body, receive), send)

    async def _refuse(self, error: InvalidText, scope: Scope, send: Send) -> None:
        response = JSONResponse(self.render(error, Request(scope)), status_code=self.status)
        await response(scope, _no_body, send)


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """The body once, then whatever the server says next (a disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _no_body() -> Message:
    return {"type": "http.request", "body": b"", "more_body": False}


_BODY_METHODS = frozenset({"post", "put", "patch"})
GUARD_DESCRIPTION = (
    "Also: a NUL character or a lone surrogate in the path, query, headers or body, JSON"
    " nested deeper than {depth} levels, a JSON number no 64-bit float holds (1e400, NaN),"
    " or a body that is not UTF-8"
)


def document_input_limits(
    openapi: dict[str, Any],
    *,
    validation_status: int,
    max_json_depth: int,
    max_body_bytes: int,
    render: ErrorRenderer | None = None,
) -> dict[str, Any]:
    """Declare in an OpenAPI document what the guards answer: their refusals beside the
    validation status on every operation (a NUL in any query string is one), and 413 on every
    operation taking a body. Each response borrows the error schema the operation already
    declares, so it is in the service's own envelope (FastAPI's `HTTPValidationError` is not
    what the service answers); with `render`, each gets an example rendered for its path."""
    status = str(validation_status)
    note = GUARD_DESCRIPTION.format(depth=max_json_depth)
    for path, item in openapi.get("paths", {}).items():
        for method, operation in item.items():
            if not isinstance(operation, dict):
                continue
            responses = operation.setdefault("responses", {})
            envelope = _error_content(responses, status)
            # Some endpoints read their body themselves and declare none: the method says.
            if (method in _BODY_METHODS or "requestBody" in operation) and "413" not in responses:
                responses["413"] = {
                    "description": f"Request body larger than {max_body_bytes} bytes",
                    **envelope,
                }
            # A service that answers validation failures with 400 never answers FastAPI's 422.
            if status != "422" and _is_fastapi_validation(responses.get("422", {})):
                del responses["422"]
            validation = responses.setdefault(status, {"description": "Invalid input", **envelope})
            if _is_fastapi_validation(validation) and envelope:
                validation["content"] = envelope["content"]
            if note not in validation.get("description", ""):
                described = validation.get("description", "")
                validation["description"] = f"{described}. {note}" if described else note
            if render is not None:
                request = _request_for(method, path)
                for code, error in (
                    (status, UnprocessableEntity("body.name: Field required")),
                    ("413", PayloadTooLarge()),
                ):
                    if code in responses:
                        _add_example(responses[code], error.code, render(error, request))
    return openapi


def _request_for(method: str, path: str) -> Request:
    """A request as the renderer would see one at `path`: envelopes may depend on the path."""
    return Request(
        {
            "type": "http",
            "method": method.upper(),
            "scheme": "http",
            "server": ("localhost", 80),
            "root_path": "",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "headers": [],
        }
    )


def _is_fastapi_validation(response: dict[str, Any]) -> bool:
    schema = response.get("content", {}).get("application/json", {}).get("schema", {})
    return bool(schema.get("$ref", "").endswith("/HTTPValidationError"))


def _add_example(response: dict[str, Any], name: str, body: dict[str, Any]) -> None:
    media = response.setdefault("content", {}).setdefault("application/json", {})
    examples = media.setdefault("examples", {})
    examples.setdefault(name, {"value": body})


def _error_content(responses: dict[str, Any], preferred: str) -> dict[str, Any]:
    """The envelope's schema alone (a copy: each response gets its own examples)."""
    for code in (preferred, *sorted(responses)):
        media = responses.get(code, {}).get("content", {}).get("application/json")
        if (
            code.startswith("4")
            and media
            and "schema" in media
            and not _is_fastapi_validation(responses[code])
        ):
            return {"content": {"application/json": {"schema": copy.deepcopy(media["schema"])}}}
    return {}
