"""Product pages answered straight from their rows.

A storefront's `products` query selecting plain fields only (ids, names, prices, variants,
cursors, page info: no field with a resolver of its own, no fragment, no directive) is most
of the traffic. For such a prepared query (`prepared.py`), the answer is built here from the
page's database rows by one function per selection, generated once per document, with no
strawberry object, no graphql-core execution and no root resolver call: the rows are read
by `load_product_page`, the same function the `products` resolver calls, after the same
argument coercion and the same criteria (`page_criteria`), and each leaf is coerced by its
GraphQL type as graphql-core would.

What each field is made of is written once more here (`FIELDS`), beside `types.py`'s `of`
constructors: `tests/test_graphql_direct.py` compares this path's bytes with the general
path's for every field listed. Anything else, and anything unusual at run time (a variable
or argument refused, a null where the schema says non-null, a value a scalar refuses, a
database error), answers None, and the request takes the prepared or general path, which
reports it as it always did.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from graphql import (
    DocumentNode,
    FieldNode,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLOutputType,
    GraphQLScalarType,
    GraphQLSchema,
    OperationDefinitionNode,
    OperationType,
    SelectionSetNode,
    get_argument_values,
    get_variable_values,
)
from graphql.pyutils import Undefined
from strawberry import Schema
from strawberry.types.arguments import convert_arguments
from strawberry.types.field import StrawberryField

from commerce_content.graphql_api.adapter import scalar_registry
from commerce_content.graphql_api.ids import encode_cursor, global_id
from commerce_content.graphql_api.inputs import given
from commerce_content.graphql_api.pagination import ProductPage, load_product_page
from commerce_content.graphql_api.queries import page_criteria
from commerce_content.orders.checkout import unit_price


class _Fallback(Exception):
    """Something this path does not answer: the request goes the prepared or general way."""


@dataclass(frozen=True, slots=True)
class Leaf:
    expression: str  # of `s`, the object's source (see FIELDS)


@dataclass(frozen=True, slots=True)
class Child:
    type_name: str
    expression: str  # the child's source, or for a list the iterable of its items' sources
    many: bool = False


# What each plain field of a product page is made of, per GraphQL type, as Python
# expressions of the object's source `s`: the page (`ProductPage`) for the connection and its
# page info, `(record, variants)` for an edge and its product (a `ProductRecord`), the
# product record for its pricing,
# `(variant, product price)` for a variant. Mirrors `types.py`'s `of` constructors.
FIELDS: dict[str, dict[str, Leaf | Child]] = {
    "ProductConnection": {
        "edges": Child("ProductEdge", "_edges(s)", many=True),
        "pageInfo": Child("PageInfo", "s"),
    },
    "ProductEdge": {
        "cursor": Leaf("_cursor(s[0].id)"),
        "node": Child("Product", "s"),
    },
    "Product": {
        "id": Leaf("_gid('Product', s[0].id)"),
        "name": Leaf("s[0].name"),
        "pricing": Child("ProductPricing", "s[0]"),
        "variants": Child("ProductVariant", "_variants(s)", many=True),
    },
    "ProductPricing": {
        "basePrice": Leaf("s.base_price"),
        "salePrice": Leaf("s.sale_price"),
        "currency": Leaf("s.currency"),
    },
    "ProductVariant": {
        "id": Leaf("_gid('ProductVariant', s[0].id)"),
        "sku": Leaf("s[0].sku"),
        "name": Leaf("s[0].name"),
        "price": Leaf("(s[0].price if s[0].price is not None else s[1])"),
        "inStock": Leaf("s[0].stock > 0"),
    },
    "PageInfo": {
        "hasNextPage": Leaf("s.has_next"),
        "hasPreviousPage": Leaf("s.has_previous"),
        "startCursor": Leaf("(_cursor(s.rows[0].id) if s.rows else None)"),
        "endCursor": Leaf("(_cursor(s.rows[-1].id) if s.rows else None)"),
    },
}
ROOT_FIELD = "products"
# Values of these exact types are their scalar's output unchanged (graphql-core's
# `serialize_string`, `serialize_id`, `serialize_boolean`): no call for them.
_UNCHANGED = {"String": str, "ID": str, "Boolean": bool}
_EMPTY: list[Any] = []


def _edges(page: ProductPage) -> list[tuple[Any, Any]]:
    variants = page.variants
    if variants is None:
        return [(row, None) for row in page.rows]
    return [(row, variants.get(row.id, _EMPTY)) for row in page.rows]


def _variants(source: tuple[Any, Any]) -> list[tuple[Any, Any]]:
    row, variants = source
    if variants is None:
        raise _Fallback
    price = unit_price(row)
    return [(variant, price) for variant in variants]


def _coerced(coerce: Callable[[Any], Any], value: Any) -> Any:
    out = coerce(value)
    if out is None or out is Undefined:
        raise _Fallback
    return out


def _null() -> None:
    raise _Fallback


_ENV: dict[str, Any] = {
    "_Fallback": _Fallback,
    "_edges": _edges,
    "_variants": _variants,
    "_coerced": _coerced,
    "_null": _null,
    "_cursor": encode_cursor,
    "_gid": global_id,
}


def _unwrapped(type_: GraphQLOutputType) -> tuple[GraphQLOutputType, bool]:
    """The type inside a non-null wrapper, and whether it was nullable."""
    if isinstance(type_, GraphQLNonNull):
        return type_.of_type, False
    return type_, True


class _Generator:
    """Python source building one object per selection (as `adapter._generate` does for
    compiled plans), or `_Fallback` raised at compile time for a selection it cannot answer."""

    def __init__(self) -> None:
        self.env: dict[str, Any] = dict(_ENV)
        self.functions: list[str] = []
        self.selects_variants = False

    def object(self, type_: GraphQLObjectType, selection_set: SelectionSetNode | None) -> str:
        """The name of the function building `type_` under `selection_set`."""
        fields = FIELDS.get(type_.name)
        if fields is None or selection_set is None:
            raise _Fallback
        name = f"b{len(self.functions)}"
        self.functions.append("")  # its slot, so children get other names
        body: list[str] = []
        shown: list[str] = []
        keys: set[str] = set()
        for selection in selection_set.selections:
            if not isinstance(selection, FieldNode) or selection.directives or selection.arguments:
                raise _Fallback  # fragments, @skip/@include: graphql-core's rules
            key = selection.alias.value if selection.alias else selection.name.value
            if key in keys:
                raise _Fallback  # merged fields: graphql-core's rules
            keys.add(key)
            value = f"v{len(shown)}"
            shown.append(f"{key!r}: {value}")
            field_name = selection.name.value
            if field_name == "__typename":
                body.append(f"{value} = {type_.name!r}")
                continue
            spec = fields.get(field_name)
            definition = type_.fields.get(field_name)
            if spec is None or definition is None:
                raise _Fallback
            field_type, nullable = _unwrapped(definition.type)
            if isinstance(spec, Leaf):
                if not isinstance(field_type, GraphQLScalarType) or selection.selection_set:
                    raise _Fallback
                body.extend(self._leaf(value, spec.expression, field_type, nullable))
                continue
            if spec.many:
                if not isinstance(field_type, GraphQLList):
                    raise _Fallback
                item_type, _ = _unwrapped(field_type.of_type)
                if not isinstance(item_type, GraphQLObjectType):
                    raise _Fallback
                build = self.object(item_type, selection.selection_set)
                body.append(f"{value} = [{build}(x) for x in {spec.expression}]")
            else:
                if not isinstance(field_type, GraphQLObjectType):
                    raise _Fallback
                build = self.object(field_type, selection.selection_set)
                body.append(f"{value} = {build}({spec.expression})")
            if type_.name == "Product" and field_name == "variants":
                self.selects_variants = True
        lines = "".join(f"    {line}\n" for line in body)
        self.functions[int(name[1:])] = (
            f"def {name}(s):\n{lines}    return {{{', '.join(shown)}}}\n"
        )
        return name

    def _leaf(
        self, value: str, expression: str, scalar: GraphQLScalarType, nullable: bool
    ) -> list[str]:
        coerce = f"f{len(self.env)}"
        self.env[coerce] = scalar.coerce_output_value
        lines = [f"{value} = {expression}", f"if {value} is None:"]
        lines.append("    pass" if nullable else "    _null()")
        unchanged = _UNCHANGED.get(scalar.name)
        if unchanged is not None:
            kind = f"t{len(self.env)}"
            self.env[kind] = unchanged
            lines.append(f"elif type({value}) is not {kind}:")
        else:
            lines.append("else:")
        lines.append(f"    {value} = _coerced({coerce}, {value})")
        return lines

    def compile(self, root: str) -> Callable[[Any], dict[str, Any]]:
        source = "\n".join(self.functions)
        exec(compile(source, "<graphql direct page>", "exec"), self.env)  # noqa: S102 - from the schema
        built: Callable[[Any], dict[str, Any]] = self.env[root]
        return built


@dataclass(frozen=True, slots=True)
class DirectPage:
    """A `products` query answered from rows: how to read its arguments and build it."""

    node: FieldNode
    key: str  # the response key
    field: StrawberryField
    build: Callable[[Any], dict[str, Any]]
    selects_variants: bool

    async def run(
        self,
        schema: Schema,
        graphql_schema: GraphQLSchema,
        operation: OperationDefinitionNode,
        variables: dict[str, Any] | None,
        context: Any,
    ) -> dict[str, Any] | None:
        """The response's `data`, or None to leave the request to the other paths (which
        then report whatever was refused, in their words)."""
        coerced = get_variable_values(
            graphql_schema, operation.variable_definitions or (), variables or {}
        )
        if isinstance(coerced, list):
            return None
        query_type = graphql_schema.query_type
        assert query_type is not None  # the operation validated
        try:
            arguments = get_argument_values(query_type.fields[ROOT_FIELD], self.node, coerced)
            kwargs = convert_arguments(
                arguments,
                self.field.arguments,
                scalar_registry=scalar_registry(schema),
                config=schema.config,
            )
            criteria = page_criteria(context, kwargs.get("filter"))
            page = await load_product_page(
                context,
                criteria,
                given(kwargs.get("page")),
                with_variants=self.selects_variants,
                records=True,
            )
            return {self.key: self.build(page)}
        except Exception:  # any refusal is reported by the other paths
            return None


def direct_page(
    graphql_schema: GraphQLSchema, operation: OperationDefinitionNode
) -> DirectPage | None:
    """The direct way of answering `operation`, when it is a plain `products` page."""
    if operation.operation != OperationType.QUERY or operation.directives:
        return None
    selections = operation.selection_set.selections
    if len(selections) != 1:
        return None
    node = selections[0]
    if not isinstance(node, FieldNode) or node.directives or node.name.value != ROOT_FIELD:
        return None
    query_type = graphql_schema.query_type
    definition = query_type.fields.get(ROOT_FIELD) if query_type is not None else None
    if definition is None:
        return None
    field = definition.extensions.get("strawberry-definition")
    if not isinstance(field, StrawberryField) or field.extensions:
        return None  # @auth, @rateLimit: their field extensions run on the other paths
    connection, _ = _unwrapped(definition.type)
    if not isinstance(connection, GraphQLObjectType):
        return None
    generator = _Generator()
    try:
        root = generator.object(connection, node.selection_set)
    except _Fallback:
        return None
    return DirectPage(
        node=node,
        key=node.alias.value if node.alias else ROOT_FIELD,
        field=field,
        build=generator.compile(root),
        selects_variants=generator.selects_variants,
    )


class DirectPages:
    """`direct_page` per prepared document and operation, worked out once; bounded, least
    recently used out."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.answered = 0  # requests answered this way (tests read it)
        self._entries: OrderedDict[
            tuple[int, str | None], tuple[DocumentNode, DirectPage | None]
        ] = OrderedDict()

    def of(
        self,
        graphql_schema: GraphQLSchema,
        document: DocumentNode,
        operation_name: str | None,
        operation: OperationDefinitionNode,
    ) -> DirectPage | None:
        key = (id(document), operation_name)
        found = self._entries.get(key)
        if found is not None and found[0] is document:
            self._entries.move_to_end(key)
            return found[1]
        page = direct_page(graphql_schema, operation)
        self._entries[key] = (document, page)  # the document kept alive: its id is the key
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)
        return page
