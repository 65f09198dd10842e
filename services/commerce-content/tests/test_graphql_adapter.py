"""The contract of `graphql_api/adapter.py`, the one module that uses strawberry's and
graphql-core's internals: each test names one internal it relies on, so an upgrade that
changes it fails here (and `test_graphql_execution.py` checks the executor answers exactly
as the stock one does)."""

from __future__ import annotations

import inspect
from importlib.metadata import requires, version
from typing import cast

import strawberry
from commerce_content.graphql_api.adapter import (
    STOCK_EXECUTION_CONTEXT,
    PlainFieldExecutionContext,
    core_schema,
    executor_for,
    plain_fields,
)
from commerce_content.graphql_api.schema import build_schema
from commerce_content.settings import Settings
from graphql import GraphQLObjectType, GraphQLSchema
from graphql.execution.executor import Executor
from strawberry.types.base import StrawberryObjectDefinition
from strawberry.types.field import StrawberryField


@strawberry.type
class Item:
    name: str

    @strawberry.field
    def shout(self) -> str:
        return self.name.upper()


@strawberry.type
class Query:
    item: Item


def test_the_installed_versions_are_the_pinned_ones() -> None:
    """Pinned as `name~=X.Y.Z`: the installed version is of that minor version."""
    declared = requires("commerce-content") or []
    for name in ("strawberry-graphql", "graphql-core"):
        [pin] = [r.split("~=")[1] for r in declared if r.startswith(f"{name}~=")]
        assert version(name).split(".")[:2] == pin.split(".")[:2], (name, version(name))


def test_core_schema_is_the_graphql_core_schema_strawberry_built() -> None:
    schema = strawberry.Schema(query=Query)
    built = core_schema(schema)
    assert isinstance(built, GraphQLSchema)
    assert built.get_type("Item") is not None
    # Strawberry's own printing reads the same schema.
    assert "type Item" in schema.as_str()


def test_strawberrys_execution_context_is_graphql_cores_executor() -> None:
    assert issubclass(STOCK_EXECUTION_CONTEXT, Executor)
    assert strawberry.Schema(query=Query).execution_context_class is STOCK_EXECUTION_CONTEXT


def test_execute_fields_takes_the_arguments_the_executor_overrides_it_with() -> None:
    parameters = list(inspect.signature(Executor.execute_fields).parameters)
    assert parameters == [
        "self",
        "parent_type",
        "source_value",
        "path",
        "grouped_field_set",
        "position_context",
    ]


def test_the_execution_context_methods_the_executor_calls_exist() -> None:
    expected = {
        "execute_field": ["parent_type", "source", "field_details_list", "path"],
        "collect_and_execute_subfields": ["return_type", "field_details_list", "path", "result"],
        "handle_field_error": ["raw_error", "return_type", "field_details_list", "path"],
        "get_stream_usage": ["field_details_list", "path"],
        "settle_in_background": [],
        "is_awaitable": [],
    }
    for name, first_parameters in expected.items():
        method = getattr(PlainFieldExecutionContext, name)
        parameters = list(inspect.signature(method).parameters)[1:]
        assert parameters[: len(first_parameters)] == first_parameters, name


def test_strawberry_marks_graphql_core_types_and_fields_with_its_definitions() -> None:
    built = core_schema(strawberry.Schema(query=Query))
    item = built.get_type("Item")
    assert isinstance(item, GraphQLObjectType)
    assert isinstance(item.extensions["strawberry-definition"], StrawberryObjectDefinition)
    name, shout = item.fields["name"], item.fields["shout"]
    assert isinstance(name.extensions["strawberry-definition"], StrawberryField)
    # Only the default resolver (attribute reads) carries the mark.
    assert getattr(name.resolve, "_is_default", False) is True
    assert getattr(shout.resolve, "_is_default", False) is False


def test_plain_fields_are_the_attribute_reads_and_nothing_else() -> None:
    found = plain_fields(core_schema(strawberry.Schema(query=Query)))
    assert set(found["Item"]) == {"name"}
    assert set(found["Query"]) == {"item"}


def test_the_service_schema_runs_on_the_adapters_executor(service_settings: Settings) -> None:
    schema = build_schema(service_settings)
    executor = schema.execution_context_class
    assert isinstance(executor, type)
    assert issubclass(executor, PlainFieldExecutionContext)
    plain = cast("type[PlainFieldExecutionContext]", executor)
    assert plain.plain_fields == plain_fields(core_schema(schema))
    assert executor_for(core_schema(schema)).plain_fields == plain.plain_fields
