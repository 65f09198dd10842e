"""What an operation will cost and how long its answer may be cached, read from the operation
document and the schema before (cost) and after (cache) execution.

Cost: 1 per object the answer can hold. A list counts its expected size times (1 + its
selections' cost): the requested `first`/`last` for paged fields, an estimate for plain lists.

Cache policy: Apollo Server's rules. A field's `@cacheControl` wins over its type's for
`maxAge`; root fields and fields returning objects without a hint get `maxAge: 0`; scalar
fields inherit from their parent; the response's `maxAge` is the minimum over the fields, and
its scope is PRIVATE if any field or type says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from graphql import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLCompositeType,
    GraphQLField,
    GraphQLInterfaceType,
    GraphQLObjectType,
    GraphQLSchema,
    InlineFragmentNode,
    OperationDefinitionNode,
    OperationType,
    SelectionSetNode,
    get_named_type,
    is_composite_type,
)
from graphql.utilities import get_operation_ast, value_from_ast_untyped

from commerce_content.graphql_api.directives import CacheControl, CacheControlScope

DEFINITION = "strawberry-definition"
# Fields whose size the client chooses: (type, field) -> (argument path, default size).
PAGED_FIELDS: dict[tuple[str, str], tuple[tuple[str, ...], int]] = {
    ("Query", "products"): (("page",), 20),
    ("User", "orders"): ((), 10),
}
# Plain lists: the size we expect, for the cost estimate.
LIST_ESTIMATES: dict[tuple[str, str], int] = {
    ("Product", "variants"): 10,
    ("Order", "lines"): 10,
}


@dataclass
class CachePolicy:
    max_age: int | None = None
    private: bool = False

    def restrict(self, max_age: int | None, private: bool) -> None:
        if max_age is not None:
            self.max_age = max_age if self.max_age is None else min(self.max_age, max_age)
        self.private = self.private or private

    def header(self) -> str:
        if not self.max_age:
            return "no-store"
        return f"max-age={self.max_age}, {'private' if self.private else 'public'}"


def _cache_hint(definition: Any) -> CacheControl | None:
    for directive in getattr(definition, "directives", None) or ():
        if isinstance(directive, CacheControl):
            return directive
    return None


def operation_variables(
    operation: OperationDefinitionNode, supplied: dict[str, Any] | None
) -> dict[str, Any]:
    """The values the operation will run with: those supplied, else the definitions' defaults
    (a supplied null stays null). Without the defaults, `query($n: Int = 100)` would be costed
    as if `$n` were absent."""
    supplied = supplied or {}
    values: dict[str, Any] = {}
    for definition in operation.variable_definitions or ():
        name = definition.variable.name.value
        if name in supplied:
            values[name] = supplied[name]
        elif definition.default_value is not None:
            values[name] = value_from_ast_untyped(definition.default_value)
    return values


@dataclass(frozen=True)
class _Walk:
    schema: GraphQLSchema
    fragments: dict[str, FragmentDefinitionNode]
    variables: dict[str, Any]


class OperationAnalyzer:
    def __init__(self, schema: GraphQLSchema) -> None:
        self.schema = schema

    def operation(
        self, document: DocumentNode, operation_name: str | None
    ) -> OperationDefinitionNode | None:
        return get_operation_ast(document, operation_name)

    def cost(
        self,
        document: DocumentNode,
        operation: OperationDefinitionNode,
        variables: dict[str, Any] | None,
    ) -> int:
        walk = self._walk(document, operation_variables(operation, variables))
        root = self._root(operation)
        return self._selection_cost(walk, operation.selection_set, root)

    def cache_policy(
        self,
        document: DocumentNode,
        operation: OperationDefinitionNode,
        variables: dict[str, Any] | None,
    ) -> CachePolicy:
        policy = CachePolicy()
        walk = self._walk(document, operation_variables(operation, variables))
        self._collect_cache(walk, operation.selection_set, self._root(operation), True, policy)
        return policy

    def _walk(self, document: DocumentNode, variables: dict[str, Any] | None) -> _Walk:
        fragments = {
            d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)
        }
        return _Walk(self.schema, fragments, variables or {})

    def _root(self, operation: OperationDefinitionNode) -> GraphQLObjectType:
        root = {
            OperationType.QUERY: self.schema.query_type,
            OperationType.MUTATION: self.schema.mutation_type,
            OperationType.SUBSCRIPTION: self.schema.subscription_type,
        }[operation.operation]
        assert root is not None
        return root

    def _fields(
        self, walk: _Walk, selections: SelectionSetNode, parent: GraphQLCompositeType
    ) -> list[tuple[GraphQLCompositeType, FieldNode]]:
        """The field nodes under a selection set, with fragments opened, each with the type
        it is selected on."""
        found: list[tuple[GraphQLCompositeType, FieldNode]] = []
        for selection in selections.selections:
            if isinstance(selection, FieldNode):
                found.append((parent, selection))
            elif isinstance(selection, InlineFragmentNode):
                found.extend(
                    self._fields(walk, selection.selection_set, self._on(parent, selection))
                )
            elif isinstance(selection, FragmentSpreadNode):
                fragment = walk.fragments.get(selection.name.value)
                if fragment is not None:
                    found.extend(
                        self._fields(walk, fragment.selection_set, self._on(parent, fragment))
                    )
        return found

    def _on(
        self, parent: GraphQLCompositeType, fragment: InlineFragmentNode | FragmentDefinitionNode
    ) -> GraphQLCompositeType:
        if fragment.type_condition is None:
            return parent
        named = self.schema.get_type(fragment.type_condition.name.value)
        return named if is_composite_type(named) else parent

    @staticmethod
    def _field(parent: GraphQLCompositeType, node: FieldNode) -> GraphQLField | None:
        if not isinstance(parent, GraphQLObjectType | GraphQLInterfaceType):
            return None
        field: GraphQLField | None = parent.fields.get(node.name.value)
        return field

    def _size(self, walk: _Walk, parent: GraphQLCompositeType, node: FieldNode) -> int:
        key = (parent.name, node.name.value)
        if key in PAGED_FIELDS:
            path, default = PAGED_FIELDS[key]
            arguments = {
                a.name.value: value_from_ast_untyped(a.value, walk.variables)
                for a in node.arguments or ()
            }
            holder: Any = arguments
            for part in path:
                holder = holder.get(part) if isinstance(holder, dict) else None
            if not isinstance(holder, dict):
                return default
            sizes = [holder.get("first"), holder.get("last")]
            given = [s for s in sizes if isinstance(s, int) and s >= 0]
            return max(given) if given else default
        return LIST_ESTIMATES.get(key, 1)

    def _selection_cost(
        self, walk: _Walk, selections: SelectionSetNode, parent: GraphQLCompositeType
    ) -> int:
        total = 0
        for owner, node in self._fields(walk, selections, parent):
            field = self._field(owner, node)
            if field is None or node.selection_set is None:
                continue
            named = get_named_type(field.type)
            if not is_composite_type(named):
                continue
            children = self._selection_cost(walk, node.selection_set, named)
            size = self._size(walk, owner, node)
            if (owner.name, node.name.value) in PAGED_FIELDS:
                total += 1 + size * children  # one connection holding `size` edges
            else:
                total += size * (1 + children)
        return total

    def _collect_cache(
        self,
        walk: _Walk,
        selections: SelectionSetNode,
        parent: GraphQLCompositeType,
        root: bool,
        policy: CachePolicy,
    ) -> None:
        for owner, node in self._fields(walk, selections, parent):
            name = node.name.value
            if name == "__typename":
                continue
            if name.startswith("__"):
                policy.restrict(0, False)
                continue
            field = self._field(owner, node)
            if field is None:
                continue
            named = get_named_type(field.type)
            composite = is_composite_type(named)
            field_hint = _cache_hint(field.extensions.get(DEFINITION))
            type_hint = (
                _cache_hint(named.extensions.get(DEFINITION))
                if isinstance(named, GraphQLObjectType)
                else None
            )
            max_age: int | None = None
            private = False
            for hint in (type_hint, field_hint):  # the field's own hint last: it wins
                if hint is None:
                    continue
                if isinstance(hint.max_age, int):
                    max_age = hint.max_age
                if hint.scope == CacheControlScope.PRIVATE:
                    private = True
            if max_age is None and (composite or root):
                max_age = 0
            policy.restrict(max_age, private)
            if composite and node.selection_set is not None:
                self._collect_cache(
                    walk, node.selection_set, cast("GraphQLCompositeType", named), False, policy
                )
