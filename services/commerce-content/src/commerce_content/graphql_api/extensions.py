"""Operation-wide rules: the cost limit (reported in `extensions.cost`), the cache policy that
becomes the `Cache-Control` header, and masking of unexpected errors."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import structlog
from graphql import ExecutionResult, GraphQLError, OperationType
from strawberry.extensions import MaskErrors, SchemaExtension

from commerce_content.graphql_api.analysis import OperationAnalyzer
from commerce_content.graphql_api.errors import INTERNAL_SERVER_ERROR, MAX_COST_EXCEEDED

logger = structlog.get_logger(__name__)


class OperationPolicy(SchemaExtension):
    """Refuses operations above `max_cost` before they run; after a query without errors,
    leaves the response's `Cache-Control` value on the context."""

    def __init__(self, max_cost: int) -> None:
        self.max_cost = max_cost
        self.requested: int | None = None

    def on_execute(self) -> Iterator[None]:
        context = self.execution_context
        analyzer = OperationAnalyzer(context.schema._schema)
        document = context.graphql_document
        operation = analyzer.operation(document, context.operation_name) if document else None
        if document is not None and operation is not None:
            self.requested = analyzer.cost(document, operation, context.variables)
            if self.requested > self.max_cost:
                context.result = ExecutionResult(
                    data=None,
                    errors=[
                        GraphQLError(
                            f"Query cost {self.requested} exceeds the maximum of {self.max_cost};"
                            " ask for fewer items per page or fewer fields",
                            extensions={
                                "code": MAX_COST_EXCEEDED,
                                "cost": self.requested,
                                "maximumCost": self.max_cost,
                            },
                        )
                    ],
                )
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


def is_unexpected(error: GraphQLError) -> bool:
    """Errors raised on purpose are GraphQLErrors; anything else is a bug or an outage."""
    original = error.original_error
    return original is not None and not isinstance(original, GraphQLError)


class MaskUnexpectedErrors(MaskErrors):
    def __init__(self) -> None:
        super().__init__(should_mask_error=is_unexpected, error_message="Unexpected error.")

    def anonymise_error(self, error: GraphQLError) -> GraphQLError:
        masked = super().anonymise_error(error)
        masked.extensions = {"code": INTERNAL_SERVER_ERROR}
        return masked
