"""The one place commerce-content reaches into strawberry's and graphql-core's internals.

Both are pinned to one minor version each (pyproject.toml); `tests/test_graphql_adapter.py`
is this module's contract: it fails when an upgrade renames, moves or changes what is used
here, and `tests/test_graphql_execution.py` checks the executor answers exactly as the stock
one does. Everything else in the service uses public APIs (`info.selected_fields`,
`info.path`).

What is reached into:

- `core_schema`: strawberry's `Schema._schema`, the graphql-core schema it builds (the
  operation analysis and the executor read its types; strawberry has no public accessor);
- `scalar_registry`: the scalars of strawberry's schema converter
  (`Schema.schema_converter.scalar_registry`), which `convert_arguments` needs to turn a
  field's coerced arguments into its resolver's inputs (`direct.py`);
- `STOCK_EXECUTION_CONTEXT`: strawberry's execution context class, which the executor below
  subclasses, overriding graphql-core's `ExecutionContext.execute_fields` and calling its
  `execute_field`, `collect_and_execute_subfields`, `handle_field_error`,
  `get_stream_usage`, `settle_in_background`, `is_awaitable` and `middleware_manager`;
- graphql-core's `execution.collect_fields` types and `pyutils.gather_with_cancel`;
- strawberry's `strawberry-definition` extensions on graphql-core types and fields, and the
  `_is_default` mark of its default resolver;
- strawberry's `graphql-transport-ws` protocol handler (`BaseGraphQLTransportWSHandler`), run
  on our own WebSocket route (`run_transport_ws`): it wants a view (only its `on_ws_connect`
  is called) and a socket adapter (`AsyncWebSocketAdapter`: `iter_json`, `send_json`,
  `close`), both given here.

A shorter path through graphql-core for fields that only read an attribute.

Most of a product page is plain data: `id`, `sku`, prices (leaves), `node` and `pricing`
(objects), `edges` and `variants` (lists of objects). None of them has a resolver: strawberry
reads the attribute. graphql-core still builds a resolve-info record, calls a resolver
wrapper and walks its generic completion steps for every one of the page's ~1,200 fields, and
that was two thirds of the time of `products(first: 50)` (see the README's benchmark).

This executor completes those fields itself, in graphql-core's order: a leaf is read and
coerced; an object is checked to be exactly its type's class and its selection executed; a
list of objects item by item. Where a plain object's or list's whole selection is plain
fields (and `__typename`), with nothing deferred or streamed, the selection is compiled once
per operation into a flat plan (`Plan`) and each object is completed by one loop over it, with
no path, resolve-info or per-field call: a product page is ~1,200 such fields.
Everything else, and anything unusual on the way (a missing attribute, null for a non-null
field, an object of another class, a value the scalar refuses, `@stream`, field middleware),
takes graphql-core's own path before any of it has run, so results and errors, with their
paths, are exactly graphql-core's: `test_graphql_execution.py` compares the two. A plan only
reads attributes and coerces leaves, so when anything unusual turns up halfway through, what
it built is dropped and the field is completed again by the path above.
"""

from __future__ import annotations

import contextlib
import json
import keyword
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import Any, TypeVar, cast

from graphql import (
    GraphQLBoolean,
    GraphQLID,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLOutputType,
    GraphQLScalarType,
    GraphQLSchema,
    GraphQLString,
    is_leaf_type,
)
from graphql.execution.collect_fields import FieldDetailsList, GroupedFieldSet
from graphql.pyutils import AwaitableOrValue, Path, Undefined
from graphql.pyutils.gather_with_cancel import gather_with_cancel
from starlette.websockets import WebSocket, WebSocketDisconnect
from strawberry import Schema
from strawberry.exceptions import ConnectionRejectionError
from strawberry.http.async_base_view import AsyncWebSocketAdapter
from strawberry.http.exceptions import (
    NonJsonMessageReceived,
    NonTextMessageReceived,
    WebSocketDisconnected,
)
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext
from strawberry.subscriptions import GRAPHQL_TRANSPORT_WS_PROTOCOL
from strawberry.subscriptions.protocols.graphql_transport_ws.handlers import (
    BaseGraphQLTransportWSHandler,
)
from strawberry.types.base import StrawberryObjectDefinition
from strawberry.types.field import StrawberryField
from strawberry.types.unset import UNSET, UnsetType

STOCK_EXECUTION_CONTEXT = StrawberryGraphQLCoreExecutionContext


def core_schema(schema: Schema) -> GraphQLSchema:
    """The graphql-core schema strawberry built for `schema`."""
    return schema._schema


def scalar_registry(schema: Schema) -> Mapping[object, Any]:
    """The scalars strawberry's converter uses for `schema`'s arguments."""
    registry: Mapping[object, Any] = schema.schema_converter.scalar_registry
    return registry


@dataclass(frozen=True, slots=True)
class PlainLeaf:
    attribute: str
    coerce: Callable[[Any], Any]
    nullable: bool
    unchanged: type | None = None  # values of this exact type are their own output


@dataclass(frozen=True, slots=True)
class PlainObject:
    attribute: str
    object_type: GraphQLObjectType
    python_class: type
    field_type: GraphQLOutputType
    nullable: bool


@dataclass(frozen=True, slots=True)
class PlainList:
    attribute: str
    item_type: GraphQLObjectType
    python_class: type
    item_field_type: GraphQLOutputType
    items_nullable: bool
    field_type: GraphQLOutputType
    nullable: bool


PlainField = PlainLeaf | PlainObject | PlainList

# A compiled selection: per response key, how to complete it (see `_generate`).
_TYPENAME, _LEAF, _OBJECT, _LIST = range(4)
# Scalars whose output coercion gives back a value of this exact type unchanged
# (graphql-core's `serialize_string`, `serialize_id`, `serialize_boolean`): the plan skips
# the call for such values.
_UNCHANGED: dict[GraphQLScalarType, type] = {
    GraphQLString: str,
    GraphQLID: str,
    GraphQLBoolean: bool,
}
PlanEntry = tuple[str, int, str, Any, bool, "Plan | None"]
Plan = tuple[PlanEntry, ...]


class _Unusual(Exception):
    """A plan met something graphql-core must complete itself (and maybe report)."""


# Per object type name: field name -> how to complete it.
PlainFields = dict[str, dict[str, PlainField]]


def _python_class(type_: GraphQLObjectType) -> type | None:
    definition = type_.extensions.get("strawberry-definition")
    return definition.origin if isinstance(definition, StrawberryObjectDefinition) else None


def _plain_field(field_type: GraphQLOutputType, attribute: str) -> PlainField | None:
    nullable = not isinstance(field_type, GraphQLNonNull)
    inner = field_type.of_type if isinstance(field_type, GraphQLNonNull) else field_type
    if is_leaf_type(inner):
        return PlainLeaf(
            attribute,
            inner.coerce_output_value,
            nullable,
            _UNCHANGED.get(inner) if isinstance(inner, GraphQLScalarType) else None,
        )
    if isinstance(inner, GraphQLObjectType) and (python_class := _python_class(inner)):
        return PlainObject(attribute, inner, python_class, field_type, nullable)
    if isinstance(inner, GraphQLList):
        item_field_type = inner.of_type
        items_nullable = not isinstance(item_field_type, GraphQLNonNull)
        item = item_field_type.of_type if not items_nullable else item_field_type
        if isinstance(item, GraphQLObjectType) and (python_class := _python_class(item)):
            return PlainList(
                attribute,
                item,
                python_class,
                item_field_type,
                items_nullable,
                field_type,
                nullable,
            )
    return None  # abstract types, lists of leaves or of lists: graphql-core's path


def plain_fields(schema: GraphQLSchema) -> PlainFields:
    """The schema's fields that strawberry resolves by reading an attribute."""
    found: PlainFields = {}
    for type_ in schema.type_map.values():
        if not isinstance(type_, GraphQLObjectType) or type_.name.startswith("__"):
            continue
        for name, field in type_.fields.items():
            definition = field.extensions.get("strawberry-definition")
            if (
                not isinstance(definition, StrawberryField)
                or not definition.is_basic_field
                or not getattr(field.resolve, "_is_default", False)
            ):
                continue
            plain = _plain_field(field.type, definition.python_name)
            if plain is not None:
                found.setdefault(type_.name, {})[name] = plain
    return found


class PlainFieldExecutionContext(STOCK_EXECUTION_CONTEXT):
    """Set `plain_fields` on a subclass per schema (see `executor_for`)."""

    plain_fields: PlainFields = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Strawberry always passes a manager; it wraps fields only when an extension
        # implements `resolve`, and then every field must go through it.
        manager = self.middleware_manager
        self.wraps_fields = manager is not None and bool(manager.middlewares)
        # Per (object type, field group): the compiled selection, or None where it has
        # fields that are not plain. The group is kept alive so its id stays its own
        # (graphql-core memoizes its subfields the same way).
        self._plans: dict[tuple[str, int], tuple[FieldDetailsList, Plan | None]] = {}

    def execute_fields(
        self,
        parent_type: GraphQLObjectType,
        source_value: Any,
        path: Path | None,
        grouped_field_set: GroupedFieldSet,
        position_context: Any,
    ) -> AwaitableOrValue[dict[str, Any]]:
        plain = self.plain_fields.get(parent_type.name)
        if plain is None or self.wraps_fields:
            return super().execute_fields(
                parent_type, source_value, path, grouped_field_set, position_context
            )
        # graphql-core's loop, in the query's order, with the plain fields done here.
        results: dict[str, Any] = {}
        pending: list[str] = []
        try:
            for response_name, field_details_list in grouped_field_set.items():
                field = plain.get(field_details_list[0].node.name.value)
                if type(field) is PlainLeaf:
                    value = _leaf_value(field, source_value)
                    if value is not Undefined:
                        results[response_name] = value
                        continue
                field_path = Path(path, response_name, parent_type.name)
                value = Undefined
                if isinstance(field, PlainObject | PlainList):
                    value = self._complete_plain(
                        field, source_value, field_details_list, field_path, position_context
                    )
                if value is Undefined:
                    value = self.execute_field(
                        parent_type, source_value, field_details_list, field_path, position_context
                    )
                    if value is Undefined:
                        continue
                results[response_name] = value
                if self.is_awaitable(value):
                    pending.append(response_name)
        except Exception:
            if pending:
                self.settle_in_background([results[name] for name in pending])
            raise
        if not pending:
            return results
        return _settled(results, pending)

    def _complete_plain(
        self,
        field: PlainObject | PlainList,
        source: Any,
        field_details_list: FieldDetailsList,
        path: Path,
        position_context: Any,
    ) -> Any:
        """The completed value, or `Undefined` when graphql-core should complete it."""
        value = getattr(source, field.attribute, Undefined)
        if value is None:
            return None if field.nullable else Undefined
        if position_context is None:
            compiled = self._complete_compiled(field, value, field_details_list)
            if compiled is not Undefined:
                return compiled
        if isinstance(field, PlainObject):
            if type(value) is not field.python_class:
                return Undefined
            return self._complete_object(
                field.object_type,
                field.field_type,
                field_details_list,
                path,
                value,
                position_context,
            )
        if type(value) is not list or self.get_stream_usage(field_details_list, path):
            return Undefined
        python_class = field.python_class
        for item in value:
            if type(item) is not python_class and not (item is None and field.items_nullable):
                return Undefined
        return self._guarded(
            partial(
                self._complete_plain_items,
                field,
                value,
                field_details_list,
                path,
                position_context,
            ),
            field.field_type,
            field_details_list,
            path,
        )

    def _complete_compiled(
        self, field: PlainObject | PlainList, value: Any, field_details_list: FieldDetailsList
    ) -> Any:
        """The value completed by its compiled plan, or `Undefined` (no plan, or something
        unusual on the way: nothing it did is kept)."""
        if isinstance(field, PlainObject):
            if type(value) is not field.python_class:
                return Undefined
            plan = self._plan(field.object_type, field_details_list)
            if plan is None:
                return Undefined
            try:
                return _run_plan(plan, value)
            except _Unusual:
                return Undefined
        if type(value) is not list:
            return Undefined
        for details in field_details_list:  # @stream: graphql-core's
            if details.node.directives:
                return Undefined
        plan = self._plan(field.item_type, field_details_list)
        if plan is None:
            return Undefined
        try:
            return _run_items(plan, value, field.python_class, field.items_nullable)
        except _Unusual:
            return Undefined

    def _plan(
        self, object_type: GraphQLObjectType, field_details_list: FieldDetailsList
    ) -> Plan | None:
        key = (object_type.name, id(field_details_list))
        cached = self._plans.get(key)
        if cached is not None:
            return cached[1]
        plan = self._compile(object_type, field_details_list)
        self._plans[key] = (field_details_list, plan)
        return plan

    def _compile(
        self, object_type: GraphQLObjectType, field_details_list: FieldDetailsList
    ) -> Plan | None:
        """The selection of `object_type` under these fields as a plan, when every field
        of it, at any depth, is plain or `__typename` and nothing is deferred."""
        grouped_field_set, new_defer_usages, forbidden = self.collect_subfields(
            object_type, field_details_list
        )
        if new_defer_usages or forbidden:
            return None
        plain = self.plain_fields.get(object_type.name)
        if plain is None:
            return None
        entries: list[PlanEntry] = []
        for response_name, details in grouped_field_set.items():
            for detail in details:
                if detail.defer_usage is not None or detail.fragment_variable_values:
                    return None
            name = details[0].node.name.value
            if name == "__typename":
                entries.append((response_name, _TYPENAME, "", object_type.name, False, None))
                continue
            field = plain.get(name)
            if isinstance(field, PlainLeaf):
                entries.append(
                    (
                        response_name,
                        _LEAF,
                        field.attribute,
                        (field.coerce, field.unchanged),
                        field.nullable,
                        None,
                    )
                )
            elif isinstance(field, PlainObject):
                sub = self._plan(field.object_type, details)
                if sub is None:
                    return None
                entries.append(
                    (
                        response_name,
                        _OBJECT,
                        field.attribute,
                        field.python_class,
                        field.nullable,
                        sub,
                    )
                )
            elif isinstance(field, PlainList):
                if any(detail.node.directives for detail in details):
                    return None
                sub = self._plan(field.item_type, details)
                if sub is None:
                    return None
                entries.append(
                    (
                        response_name,
                        _LIST,
                        field.attribute,
                        (field.python_class, field.items_nullable),
                        field.nullable,
                        sub,
                    )
                )
            else:
                return None
        return tuple(entries)

    def _complete_plain_items(
        self,
        field: PlainList,
        items: list[Any],
        field_details_list: FieldDetailsList,
        path: Path,
        position_context: Any,
    ) -> AwaitableOrValue[list[Any]]:
        completed: list[Any] = []
        pending: list[int] = []
        try:
            for index, item in enumerate(items):
                if item is None:
                    completed.append(None)
                    continue
                value = self._complete_object(
                    field.item_type,
                    field.item_field_type,
                    field_details_list,
                    path.add_key(index, None),
                    item,
                    position_context,
                )
                if self.is_awaitable(value):
                    pending.append(index)
                completed.append(value)
        except Exception:
            if pending:
                self.settle_in_background([completed[index] for index in pending])
            raise
        if not pending:
            return completed
        return _settled(completed, pending)

    def _complete_object(
        self,
        object_type: GraphQLObjectType,
        field_type: GraphQLOutputType,
        field_details_list: FieldDetailsList,
        path: Path,
        value: Any,
        position_context: Any,
    ) -> Any:
        return self._guarded(
            partial(
                self.collect_and_execute_subfields,
                object_type,
                field_details_list,
                path,
                value,
                position_context,
            ),
            field_type,
            field_details_list,
            path,
        )

    def _guarded(
        self,
        complete: Callable[[], AwaitableOrValue[Any]],
        field_type: GraphQLOutputType,
        field_details_list: FieldDetailsList,
        path: Path,
    ) -> Any:
        """graphql-core's field error rule: a nullable field becomes null and its error is
        collected; a non-null one passes the error to its parent."""
        try:
            result = complete()
        except Exception as error:
            self.handle_field_error(error, field_type, field_details_list, path)
            return None
        if not self.is_awaitable(result):
            return result

        async def awaited() -> Any:
            try:
                return await result
            except Exception as error:
                self.handle_field_error(error, field_type, field_details_list, path)
                return None

        return awaited()


def _leaf_value(field: PlainLeaf, source: Any) -> Any:
    value = getattr(source, field.attribute, Undefined)
    if value is None:
        return None if field.nullable else Undefined
    if value is Undefined or isinstance(value, Exception):
        return Undefined
    try:
        coerced = field.coerce(value)
    except Exception:  # graphql-core's path reports it, located
        return Undefined
    return Undefined if coerced is None else coerced


def _run_plan(plan: Plan, source: Any) -> dict[str, Any]:
    """`source` completed by `plan`: graphql-core's answer when nothing is unusual, else
    `_Unusual` is raised."""
    return _generated(plan)(source)


def _run_items(plan: Plan, items: list[Any], python_class: type, nullable: bool) -> list[Any]:
    run = _generated(plan)
    return [run(item) if type(item) is python_class else _item(item, nullable) for item in items]


def _item(item: Any, nullable: bool) -> Any:
    """A list's item that is not of its class: null where allowed."""
    if item is None and nullable:
        return item
    raise _Unusual


def _leaf(value: Any, coerce: Callable[[Any], Any], nullable: bool) -> Any:
    """A leaf's value that is not already its own output (None, or coerced)."""
    if value is None:
        if nullable:
            return None
        raise _Unusual
    if value is Undefined or isinstance(value, Exception):
        raise _Unusual
    coerced = coerce(value)
    if coerced is None or coerced is Undefined:
        raise _Unusual
    return coerced


def _absent(value: Any, nullable: bool) -> Any:
    """An object or list field whose value is not of its kind: null where allowed."""
    if value is None and nullable:
        return value
    raise _Unusual


# Plans are made per operation, their Python functions once per plan (a plan is a tuple of
# plain values: equal plans share theirs). Bounded: emptied when full.
_GENERATED: dict[Plan, Callable[[Any], dict[str, Any]]] = {}
MAX_GENERATED = 1024


def _generated(plan: Plan) -> Callable[[Any], dict[str, Any]]:
    run = _GENERATED.get(plan)
    if run is None:
        if len(_GENERATED) >= MAX_GENERATED:
            _GENERATED.clear()
        run = _GENERATED[plan] = _generate(plan)
    return run


def _generate(plan: Plan) -> Callable[[Any], dict[str, Any]]:
    """A function completing an object by `plan`, as straight-line code: each field read
    as an attribute, checked and put in one dict display, so a page of products costs no
    interpretation of the plan per object. Any exception on the way (a missing attribute, a
    scalar refusing its value) becomes `_Unusual`: graphql-core completes the field again."""
    env: dict[str, Any] = {
        "_Unusual": _Unusual,
        "_leaf": _leaf,
        "_item": _item,
        "_absent": _absent,
    }
    body: list[str] = []
    shown: list[str] = []
    for index, (name, kind, attribute, how, nullable, sub) in enumerate(plan):
        value = f"v{index}"
        shown.append(f"{name!r}: {value}")
        if kind == _TYPENAME:
            env[value] = how
            continue
        if attribute.isidentifier() and not keyword.iskeyword(attribute):
            body.append(f"{value} = source.{attribute}")
        else:
            env[f"a{index}"] = attribute
            body.append(f"{value} = getattr(source, a{index})")
        if kind == _LEAF:
            coerce, unchanged = how
            env[f"f{index}"] = coerce
            slow = f"{value} = _leaf({value}, f{index}, {nullable})"
            # null where allowed, and values already their own output, need no call
            checks = [f"{value} is not None"] if nullable else []
            if unchanged is not None:
                env[f"t{index}"] = unchanged
                checks.append(f"type({value}) is not t{index}")
            body.append(f"if {' and '.join(checks)}: {slow}" if checks else slow)
        elif kind == _OBJECT:
            env[f"k{index}"], env[f"p{index}"] = how, _generated(cast("Plan", sub))
            body.append(
                f"{value} = p{index}({value}) if type({value}) is k{index}"
                f" else _absent({value}, {nullable})"
            )
        else:
            python_class, items_nullable = how
            env[f"k{index}"], env[f"p{index}"] = python_class, _generated(cast("Plan", sub))
            body.append(
                f"{value} = [p{index}(x) if type(x) is k{index} else _item(x, {items_nullable})"
                f" for x in {value}] if type({value}) is list else _absent({value}, {nullable})"
            )
    indented = "".join(f"        {line}\n" for line in body)
    source = (
        "def run(source):\n"
        "    try:\n"
        f"{indented}"
        "        pass\n"
        "    except _Unusual:\n"
        "        raise\n"
        "    except Exception as exc:\n"
        "        raise _Unusual from exc\n"
        f"    return {{{', '.join(shown)}}}\n"
    )
    exec(compile(source, "<graphql plan>", "exec"), env)  # noqa: S102 - code from the schema
    run: Callable[[Any], dict[str, Any]] = env["run"]
    return run


# A response object or list whose awaitable entries at `keys` are replaced by their values.
Completed = TypeVar("Completed", dict[str, Any], list[Any])


async def _settled(completed: Completed, keys: Sequence[Any]) -> Completed:
    values = await gather_with_cancel(*(completed[key] for key in keys))
    for key, value in zip(keys, values, strict=True):
        completed[key] = value
    return completed


def executor_for(schema: GraphQLSchema) -> type[PlainFieldExecutionContext]:
    return type(
        "SchemaExecutionContext",
        (PlainFieldExecutionContext,),
        {"plain_fields": plain_fields(schema)},
    )


# --- graphql-transport-ws over our own WebSocket route -------------------------------------


TRANSPORT_WS_PROTOCOL: str = GRAPHQL_TRANSPORT_WS_PROTOCOL


class ConnectionRefused(Exception):
    """Raised by `on_connect`: the socket is closed with this code and reason."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


class MalformedMessage(ValueError):
    """JSON that is not a message of the protocol: the socket is closed with 4400 and this."""


class _Socket(AsyncWebSocketAdapter):
    def __init__(self, view: Any, websocket: WebSocket, parse: Callable[[str], object]) -> None:
        super().__init__(view)
        self.websocket = websocket
        self.parse = parse
        self.closed = False

    async def iter_json(self, *, ignore_parsing_errors: bool = False) -> AsyncGenerator[object]:
        try:
            while not self.closed:
                message = await self.websocket.receive()
                if message["type"] == "websocket.disconnect":
                    return
                text = message.get("text")
                if text is None:
                    raise NonTextMessageReceived
                try:
                    parsed = self.parse(text)
                except MalformedMessage as exc:
                    await self.close(4400, str(exc))
                    return
                except ValueError as exc:
                    if ignore_parsing_errors:
                        continue
                    raise NonJsonMessageReceived from exc
                yield parsed
        except (WebSocketDisconnect, RuntimeError):
            return  # closed meanwhile (by us: shutdown, a refusal)

    async def send_json(self, message: Mapping[str, object]) -> None:
        if self.closed:
            raise WebSocketDisconnected
        try:
            await self.websocket.send_text(json.dumps(message, separators=(",", ":")))
        except (WebSocketDisconnect, RuntimeError, OSError) as exc:
            raise WebSocketDisconnected from exc

    async def close(self, code: int, reason: str) -> None:
        """Once: strawberry closes again after a refusal we already closed with our code."""
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(RuntimeError, OSError, WebSocketDisconnect):
            await self.websocket.close(code=code, reason=reason)


class _View:
    def __init__(self, socket: Callable[[], _Socket], on_connect: OnConnect) -> None:
        self._socket = socket
        self._on_connect = on_connect

    async def on_ws_connect(self, context: Any) -> UnsetType:
        try:
            await self._on_connect(context.connection_params or {})
        except ConnectionRefused as refused:
            await self._socket().close(refused.code, refused.reason)
            raise ConnectionRejectionError from refused
        return cast("UnsetType", UNSET)


OnConnect = Callable[[dict[str, object]], Awaitable[None]]


class TransportWS:
    """One accepted socket speaking graphql-transport-ws through strawberry's handler."""

    def __init__(
        self,
        websocket: WebSocket,
        schema: Schema,
        context: Any,
        *,
        on_connect: OnConnect,
        parse: Callable[[str], object],
        init_timeout: timedelta,
        max_operations: int,
    ) -> None:
        view = _View(lambda: self.socket, on_connect)
        self.socket = _Socket(view, websocket, parse)
        self.handler: BaseGraphQLTransportWSHandler[Any, None] = BaseGraphQLTransportWSHandler(
            view=cast("Any", view),
            websocket=self.socket,
            context=context,
            root_value=None,
            schema=schema,
            connection_init_wait_timeout=init_timeout,
            max_subscriptions_per_connection=max_operations,
        )

    @property
    def acknowledged(self) -> bool:
        return self.handler.connection_acknowledged

    async def run(self) -> None:
        await self.handler.handle()

    async def ping(self) -> None:
        """The protocol's heartbeat: clients answer `pong`."""
        await self.socket.send_json({"type": "ping"})

    async def close(self, code: int, reason: str) -> None:
        await self.socket.close(code, reason)
