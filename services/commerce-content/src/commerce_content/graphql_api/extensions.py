"""Operation-wide rules: strings that cannot be stored refused, the cost limit (reported in
`extensions.cost`), the cache policy that becomes the `Cache-Control` header, and masking of
unexpected errors."""

from __future__ import annotations

from collections.abc import Iterator
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
from commerce_content.graphql_api.analysis import OperationAnalyzer
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


class OperationPolicy(SchemaExtension):
    """Refuses variables holding text that cannot be stored and operations above `max_cost`
    before they run; after a query without errors, leaves the response's `Cache-Control`
    value on the context."""

    def __init__(self, max_cost: int) -> None:
        self.max_cost = max_cost
        self.requested: int | None = None

    def on_validate(self) -> Iterator[None]:
        # A subscription is subscribed whatever `on_execute` leaves in the result, so its
        # refusals are validation errors: the protocol's `error` message, nothing subscribed.
        context = self.execution_context
        document = context.graphql_document
        if document is not None and not context.pre_execution_errors:
            analyzer = OperationAnalyzer(core_schema(context.schema))
            operation = analyzer.operation(document, context.operation_name)
            if operation is not None and operation.operation == OperationType.SUBSCRIPTION:
                refusal = self._refusal(analyzer, document, operation)
                if refusal is not None:
                    context.pre_execution_errors = [refusal]
        yield

    def _refusal(
        self,
        analyzer: OperationAnalyzer,
        document: DocumentNode,
        operation: OperationDefinitionNode,
    ) -> GraphQLError | None:
        context = self.execution_context
        if reason := bad_text_in(context.variables, "variables"):
            return bad_input(reason)
        self.requested = analyzer.cost(document, operation, context.variables)
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
        analyzer = OperationAnalyzer(core_schema(context.schema))
        document = context.graphql_document
        operation = analyzer.operation(document, context.operation_name) if document else None
        if reason := bad_text_in(context.variables, "variables"):
            context.result = ExecutionResult(data=None, errors=[bad_input(reason)])
        elif (
            document is not None
            and operation is not None
            and operation.operation != OperationType.SUBSCRIPTION
            and (refusal := self._refusal(analyzer, document, operation)) is not None
        ):
            context.result = ExecutionResult(data=None, errors=[refusal])
        yield
        result = context.result
        if (
            document is None
            or operation is None
            or operation.operation != OperationType.QUERY
            or result is None
            or getattr(result, "errors", None)
        ):
            return
        policy = analyzer.cache_policy(document, operation, context.variables)
        hints = context.context.cache_hints
        policy.restrict(hints.max_age, hints.private)
        context.context.cache_control = policy.header()

    def get_results(self) -> dict[str, Any]:
        if self.requested is None:
            return {}
        return {"cost": {"requestedQueryCost": self.requested, "maximumAvailable": self.max_cost}}


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
        for error in errors or ():
            if caused_by_invalid_input(error) and not (error.extensions or {}).get("code"):
                error.extensions = {**(error.extensions or {}), "code": BAD_USER_INPUT}
