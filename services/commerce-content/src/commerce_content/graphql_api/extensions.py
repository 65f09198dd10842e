"""Operation-wide rules: strings that cannot be stored refused, the cost limit (reported in
`extensions.cost`), the cache policy that becomes the `Cache-Control` header, and masking of
unexpected errors."""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import structlog
from graphql import (
    DocumentNode,
    ExecutionResult,
    GraphQLError,
    OperationDefinitionNode,
    OperationType,
    StringValueNode,
    ValidationRule,
)
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode
from servicekit.tracing import tracer, tracing_enabled
from servicekit.web.input_guard import bad_text_in, bad_text_reason
from strawberry.extensions import MaskErrors, SchemaExtension

from commerce_content.graphql_api.adapter import core_schema
from commerce_content.graphql_api.analysis import CachePolicy, OperationAnalyzer
from commerce_content.graphql_api.context import DynamicCacheHints
from commerce_content.graphql_api.errors import (
    BAD_USER_INPUT,
    INTERNAL_SERVER_ERROR,
    MAX_COST_EXCEEDED,
    UNSTORABLE_MESSAGE,
    bad_input,
    caused_by_invalid_input,
)

logger = structlog.get_logger(__name__)


class RefuseUnstorableLiterals(ValidationRule):
    """String literals of the document (arguments, input fields, variable defaults) with NUL
    or a lone surrogate; variables are checked by OperationPolicy."""

    def enter_string_value(self, node: StringValueNode, *_args: Any) -> None:
        if bad_text_reason(node.value):
            self.report_error(
                GraphQLError(UNSTORABLE_MESSAGE, node, extensions={"code": BAD_USER_INPUT})
            )


@dataclass
class Analysis:
    """What OperationPolicy reads from an operation and its variables: the same for every
    request that sends them, so worked out once (see `OperationAnalyses`)."""

    document: DocumentNode  # kept alive: the cache is keyed by its id
    operation: OperationDefinitionNode | None
    cost: int | None = None
    cache: CachePolicy | None = None


# Variables longer than this as JSON are analysed afresh rather than kept as a key.
MAX_CACHED_VARIABLES_CHARS = 1024


class OperationAnalyses:
    """The analysis of recent (document, operation name, variables), per schema.

    Storefronts send the same few operations with the same few variables; the parser cache
    hands back the same document object for the same text (by hash too, for persisted
    queries), so its identity and the variables' JSON name the analysis. Bounded, least
    recently used out."""

    def __init__(self, capacity: int = 512) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[tuple[int, str | None, str], Analysis] = OrderedDict()

    def of(
        self,
        analyzer: OperationAnalyzer,
        document: DocumentNode,
        operation_name: str | None,
        variables: dict[str, Any] | None,
    ) -> Analysis:
        try:
            shown = json.dumps(variables, sort_keys=True, separators=(",", ":"))
        except (TypeError, ValueError):
            shown = None
        if shown is None or len(shown) > MAX_CACHED_VARIABLES_CHARS:
            return Analysis(document, analyzer.operation(document, operation_name))
        key = (id(document), operation_name, shown)
        found = self._entries.get(key)
        if found is not None and found.document is document:
            self._entries.move_to_end(key)
            return found
        found = Analysis(document, analyzer.operation(document, operation_name))
        self._entries[key] = found
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)
        return found


class OperationPolicy(SchemaExtension):
    """Refuses variables holding text that cannot be stored and operations above `max_cost`
    before they run; after a query without errors, leaves the response's `Cache-Control`
    value on the context. The cost and the static cache policy of an operation with given
    variables are worked out once (`analyses`), not per request."""

    def __init__(self, max_cost: int, analyses: OperationAnalyses | None = None) -> None:
        self.max_cost = max_cost
        self.analyses = analyses or OperationAnalyses()
        self.requested: int | None = None

    def _analysis(self) -> tuple[OperationAnalyzer, Analysis | None]:
        context = self.execution_context
        analyzer = OperationAnalyzer(core_schema(context.schema))
        document = context.graphql_document
        if document is None:
            return analyzer, None
        return analyzer, self.analyses.of(
            analyzer, document, context.operation_name, context.variables
        )

    def on_validate(self) -> Iterator[None]:
        # A subscription is subscribed whatever `on_execute` leaves in the result, so its
        # refusals are validation errors: the protocol's `error` message, nothing subscribed.
        context = self.execution_context
        if context.graphql_document is not None and not context.pre_execution_errors:
            analyzer, analysis = self._analysis()
            operation = analysis.operation if analysis is not None else None
            if (
                analysis is not None
                and operation is not None
                and operation.operation == OperationType.SUBSCRIPTION
            ):
                refusal = self._refusal(analyzer, analysis, operation)
                if refusal is not None:
                    context.pre_execution_errors = [refusal]
        yield

    def _refusal(
        self,
        analyzer: OperationAnalyzer,
        analysis: Analysis,
        operation: OperationDefinitionNode,
    ) -> GraphQLError | None:
        context = self.execution_context
        if reason := bad_text_in(context.variables, "variables"):
            return bad_input(reason)
        if analysis.cost is None:
            analysis.cost = analyzer.cost(analysis.document, operation, context.variables)
        self.requested = analysis.cost
        span = trace.get_current_span()
        if span.is_recording():
            span.set_attribute("graphql.operation.cost", self.requested)
        if self.requested > self.max_cost:
            return GraphQLError(
                f"Query cost {self.requested} exceeds the maximum of {self.max_cost};"
                " ask for fewer items per page or fewer fields",
                extensions={
                    "code": MAX_COST_EXCEEDED,
                    "cost": self.requested,
                    "maximumCost": self.max_cost,
                },
            )
        return None

    def on_execute(self) -> Iterator[None]:
        context = self.execution_context
        analyzer, analysis = self._analysis()
        operation = analysis.operation if analysis is not None else None
        if reason := bad_text_in(context.variables, "variables"):
            context.result = ExecutionResult(data=None, errors=[bad_input(reason)])
        elif (
            analysis is not None
            and operation is not None
            and operation.operation != OperationType.SUBSCRIPTION
            and (refusal := self._refusal(analyzer, analysis, operation)) is not None
        ):
            context.result = ExecutionResult(data=None, errors=[refusal])
        yield
        result = context.result
        if (
            analysis is None
            or operation is None
            or operation.operation != OperationType.QUERY
            or result is None
            or getattr(result, "errors", None)
        ):
            return
        context.context.cache_control = cache_header(
            analyzer, analysis, operation, context.variables, context.context.cache_hints
        )

    def get_results(self) -> dict[str, Any]:
        if self.requested is None:
            return {}
        return cost_report(self.requested, self.max_cost)


def cost_report(requested: int, max_cost: int) -> dict[str, Any]:
    """The response's `extensions` of an operation whose cost was checked."""
    return {"cost": {"requestedQueryCost": requested, "maximumAvailable": max_cost}}


def cache_header(
    analyzer: OperationAnalyzer,
    analysis: Analysis,
    operation: OperationDefinitionNode,
    variables: dict[str, Any] | None,
    hints: DynamicCacheHints,
) -> str:
    """`Cache-Control` of a query that ran without errors: its static policy (worked out
    once per analysis) restricted by the hints its resolvers left."""
    if analysis.cache is None:
        analysis.cache = analyzer.cache_policy(analysis.document, operation, variables)
    # A copy: the run-time hints are this request's alone.
    policy = CachePolicy(analysis.cache.max_age, analysis.cache.private)
    policy.restrict(hints.max_age, hints.private)
    return policy.header()


class OperationSpan(SchemaExtension):
    """One span per GraphQL operation, named `<type> <name>` as the semantic conventions say,
    with its cost (set by OperationPolicy); never one per field, which would be hundreds for
    a page of products. Nothing is done when tracing is off."""

    def on_operation(self) -> Iterator[None]:
        if not tracing_enabled():
            yield
            return
        context = self.execution_context
        with tracer.start_as_current_span("graphql") as span:
            yield
            kind = context.operation_type.value if context.operation_type else "operation"
            name = context.operation_name
            span.update_name(f"{kind} {name}" if name else kind)
            span.set_attribute("graphql.operation.type", kind)
            if name:
                span.set_attribute("graphql.operation.name", name)
            result = context.result
            if result is not None and getattr(result, "errors", None):
                span.set_status(Status(StatusCode.ERROR, "the operation answered with errors"))


def is_unexpected(error: GraphQLError) -> bool:
    """Errors raised on purpose are GraphQLErrors, or input refused by a scalar (which
    graphql-core wraps); anything else is a bug or an outage."""
    original = error.original_error
    return (
        original is not None
        and not isinstance(original, GraphQLError)
        and not caused_by_invalid_input(original)
    )


class MaskUnexpectedErrors(MaskErrors):
    def __init__(self) -> None:
        super().__init__(should_mask_error=is_unexpected, error_message="Unexpected error.")

    def anonymise_error(self, error: GraphQLError) -> GraphQLError:
        masked = super().anonymise_error(error)
        masked.extensions = {"code": INTERNAL_SERVER_ERROR}
        return masked

    def masked(self, errors: list[GraphQLError]) -> list[GraphQLError]:
        """What this extension leaves of `errors` (for a run outside strawberry's hooks)."""
        return [
            self.anonymise_error(error) if self.should_mask_error(error) else error
            for error in errors
        ]


class InvalidInputCodes(SchemaExtension):
    """graphql-core rewraps a scalar's error (e.g. "Variable '$f' has invalid value..."),
    losing its extensions: the code is put back on the error the client sees. Such errors are
    never masked (`is_unexpected`), so this runs before or after `MaskUnexpectedErrors` alike,
    on strawberry's public extension hook rather than inside its masking."""

    def on_operation(self) -> Iterator[None]:
        yield
        result = self.execution_context.result
        errors = getattr(result, "errors", None)
        if errors is None:
            errors = getattr(getattr(result, "initial_result", None), "errors", None)
        put_input_codes(errors or ())


def put_input_codes(errors: Iterable[GraphQLError]) -> None:
    for error in errors:
        if caused_by_invalid_input(error) and not (error.extensions or {}).get("code"):
            error.extensions = {**(error.extensions or {}), "code": BAD_USER_INPUT}
