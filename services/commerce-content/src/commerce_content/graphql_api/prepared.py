"""Queries that already ran, kept ready to run again without strawberry's per-request steps.

A storefront sends the same few queries (often by persisted hash) over and over. Once a query
document has been parsed, passed the token limit and validated by the general path
(`strawberry.Schema.execute` with every extension), nothing in those steps can answer
differently for the same text and operation name: they read the text only, never the
variables or the caller. So the validated document is kept by (text, operation name), and the
next request with them runs graphql-core's executor on it directly, doing here what the
extensions do around execution (variables that cannot be stored refused, the cost limit and
its report, masking unexpected errors, input-error codes, `Cache-Control`); anything that
would be refused, and every operation while tracing is on (its span), goes the general way.
A plain page of products skips graphql-core too: it is built from its rows (`direct.py`).
`tests/test_graphql_prepared.py` and `tests/test_graphql_direct.py` check every way gives
the same answers.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from inspect import isawaitable
from typing import TYPE_CHECKING, Any, TypeGuard, cast

from graphql import DocumentNode, GraphQLError, OperationDefinitionNode
from graphql import execute as core_execute
from servicekit.tracing import tracing_enabled
from servicekit.web.input_guard import bad_text_in
from strawberry.execution import optimized_is_awaitable
from strawberry.extensions import SchemaExtension
from strawberry.types import ExecutionResult
from strawberry.types.graphql import OperationType

from commerce_content.graphql_api.adapter import core_schema
from commerce_content.graphql_api.analysis import OperationAnalyzer
from commerce_content.graphql_api.direct import DirectPages
from commerce_content.graphql_api.extensions import (
    MaskUnexpectedErrors,
    OperationAnalyses,
    cache_header,
    cost_report,
    put_input_codes,
)

if TYPE_CHECKING:
    from strawberry import Schema


@dataclass(frozen=True, slots=True)
class PreparedQuery:
    document: DocumentNode  # the parser cache's object: the analyses are keyed by its id
    operation_name: str | None  # as resolved from the document


class PreparedQueries:
    """Validated query documents by (text, operation name as sent); bounded, least recently
    used out."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[tuple[str, str | None], PreparedQuery] = OrderedDict()

    def get(self, query: str, operation_name: str | None) -> PreparedQuery | None:
        key = (query, operation_name)
        found = self._entries.get(key)
        if found is not None:
            self._entries.move_to_end(key)
        return found

    def keep(self, query: str, operation_name: str | None, prepared: PreparedQuery) -> None:
        self._entries[(query, operation_name)] = prepared
        self._entries.move_to_end((query, operation_name))
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


class KeepValidatedQueries(SchemaExtension):
    """Keeps a query's document once the general path validated it (execution is only
    reached past parsing, the token limit and validation)."""

    def __init__(self, prepared: PreparedQueries) -> None:
        self.prepared = prepared

    def on_execute(self) -> Iterator[None]:
        yield
        context = self.execution_context
        query, document = context.query, context.graphql_document
        if query is None or document is None or context.operation_type != OperationType.QUERY:
            return
        name = context.operation_name
        prepared = PreparedQuery(document, name)
        self.prepared.keep(query, name, prepared)
        operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
        if len(operations) == 1:  # what a request naming no operation runs
            self.prepared.keep(query, None, prepared)


@dataclass
class PreparedRunner:
    """Runs a prepared query as the general path would, or answers None to send it there."""

    schema: Schema
    prepared: PreparedQueries
    analyses: OperationAnalyses
    max_cost: int
    # Plain product pages answered from their rows (`direct.py`); None: never.
    direct: DirectPages | None = None

    async def run(
        self,
        query: str,
        operation_name: str | None,
        variables: dict[str, Any] | None,
        context: Any,
    ) -> ExecutionResult | None:
        if tracing_enabled():
            return None  # the general path opens the operation's span
        prepared = self.prepared.get(query, operation_name)
        if prepared is None or bad_text_in(variables, "variables"):
            return None
        graphql_schema = core_schema(self.schema)
        analyzer = OperationAnalyzer(graphql_schema)
        analysis = self.analyses.of(analyzer, prepared.document, prepared.operation_name, variables)
        operation = analysis.operation
        if operation is None:
            return None
        if analysis.cost is None:
            analysis.cost = analyzer.cost(analysis.document, operation, variables)
        if analysis.cost > self.max_cost:
            return None  # refused, in the general path's words
        pages = self.direct
        direct = (
            None
            if pages is None
            else pages.of(graphql_schema, prepared.document, prepared.operation_name, operation)
        )
        if pages is not None and direct is not None:
            data = await direct.run(self.schema, graphql_schema, operation, variables, context)
            if data is not None:
                pages.answered += 1
                context.cache_control = cache_header(
                    analyzer, analysis, operation, variables, context.cache_hints
                )
                return ExecutionResult(
                    data=data, errors=None, extensions=cost_report(analysis.cost, self.max_cost)
                )
        result = core_execute(
            graphql_schema,
            prepared.document,
            context_value=context,
            variable_values=variables,
            operation_name=prepared.operation_name,
            executor_class=self.schema.execution_context_class,
            is_awaitable=cast("Callable[[Any], TypeGuard[Awaitable[Any]]]", optimized_is_awaitable),
        )
        if isawaitable(result):
            result = await result
        errors: list[GraphQLError] | None = result.errors
        if errors:
            # As strawberry does: logged before masking, then each extension's final step.
            self.schema.process_errors(errors)
            put_input_codes(errors)
            errors = MaskUnexpectedErrors().masked(errors)
        else:
            context.cache_control = cache_header(
                analyzer, analysis, operation, variables, context.cache_hints
            )
        return ExecutionResult(
            data=result.data,
            errors=errors,
            extensions=cost_report(analysis.cost, self.max_cost),
        )
