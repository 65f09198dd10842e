"""The schema and its operation rules, built once per app from the settings."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import strawberry
import structlog
from graphql import GraphQLError
from strawberry.extensions import (
    AddValidationRules,
    DisableIntrospection,
    MaxAliasesLimiter,
    MaxTokensLimiter,
    ParserCache,
    QueryDepthLimiter,
    SchemaExtension,
    ValidationCache,
)
from strawberry.schema.config import StrawberryConfig
from strawberry.schema.schema import StreamResult
from strawberry.types import ExecutionContext, ExecutionResult
from strawberry.types.graphql import OperationType

from commerce_content.graphql_api.adapter import core_schema, executor_for
from commerce_content.graphql_api.direct import DirectPages
from commerce_content.graphql_api.extensions import (
    InvalidInputCodes,
    MaskUnexpectedErrors,
    OperationAnalyses,
    OperationPolicy,
    OperationSpan,
    RefuseUnstorableLiterals,
    is_unexpected,
)
from commerce_content.graphql_api.mutations import Mutation
from commerce_content.graphql_api.prepared import (
    KeepValidatedQueries,
    PreparedQueries,
    PreparedRunner,
)
from commerce_content.graphql_api.queries import Query
from commerce_content.graphql_api.scalars import SCALARS
from commerce_content.graphql_api.subscriptions import Subscription
from commerce_content.graphql_api.types import Order, Product, ProductVariant, User
from commerce_content.settings import Settings

logger = structlog.get_logger(__name__)
CACHED_DOCUMENTS = 512


class CommerceSchema(strawberry.Schema):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Built from the finished schema, so it can only be set afterwards.
        self.execution_context_class = executor_for(core_schema(self))
        self.prepared_runner: PreparedRunner | None = None

    async def execute(
        self,
        query: str | None,
        variable_values: dict[str, Any] | None = None,
        context_value: Any | None = None,
        root_value: Any | None = None,
        operation_name: str | None = None,
        allowed_operation_types: Iterable[OperationType] | None = None,
        operation_extensions: dict[str, Any] | None = None,
    ) -> ExecutionResult:
        """A query validated before runs without strawberry's per-request steps
        (`prepared.py`); anything else, or anything that would be refused, the general way."""
        runner = self.prepared_runner
        if (
            runner is not None
            and query is not None
            and root_value is None
            and operation_extensions is None
            and (allowed_operation_types is None or OperationType.QUERY in allowed_operation_types)
        ):
            result = await runner.run(query, operation_name, variable_values, context_value)
            if result is not None:
                return result
        return await super().execute(
            query,
            variable_values,
            context_value,
            root_value,
            operation_name,
            allowed_operation_types,
            operation_extensions,
        )

    async def stream(
        self,
        query: str | None,
        variable_values: dict[str, Any] | None = None,
        context_value: Any | None = None,
        root_value: Any | None = None,
        operation_name: str | None = None,
        operation_extensions: dict[str, Any] | None = None,
        allowed_operation_types: Iterable[OperationType] | None = None,
    ) -> StreamResult:
        """Streams (the WebSocket) run subscriptions only: queries and mutations keep HTTP,
        with its caching, idempotency keys and one transaction per request."""
        return await super().stream(
            query,
            variable_values,
            context_value,
            root_value,
            operation_name,
            operation_extensions,
            allowed_operation_types or (OperationType.SUBSCRIPTION,),
        )

    def process_errors(
        self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None
    ) -> None:
        """Client errors (auth, limits, bad input) are answers, not incidents: log only the
        unexpected ones, with their traceback, before they are masked."""
        for error in errors:
            if is_unexpected(error):
                logger.error(
                    "graphql resolver failed",
                    path=error.path,
                    exc_info=error.original_error,
                )


def build_schema(settings: Settings) -> CommerceSchema:
    # The rule classes are made once: the validation cache keys on them, so the same query
    # text is parsed and validated once, not on every request.
    rules = [
        *QueryDepthLimiter(max_depth=settings.graphql_max_depth).validation_rules,
        *MaxAliasesLimiter(max_alias_count=settings.graphql_max_aliases).validation_rules,
        RefuseUnstorableLiterals,
        *(DisableIntrospection().validation_rules if settings.is_production else []),
    ]
    # Shared by the schema's requests: an operation's cost and cache policy, once.
    analyses = OperationAnalyses()
    prepared = PreparedQueries(CACHED_DOCUMENTS)
    extensions: list[Callable[[], SchemaExtension]] = [
        # First, so the operation's span is current for everything the others do.
        OperationSpan,
        lambda: MaxTokensLimiter(max_token_count=settings.graphql_max_tokens),
        lambda: AddValidationRules(rules),
        lambda: ParserCache(maxsize=CACHED_DOCUMENTS),
        lambda: ValidationCache(maxsize=CACHED_DOCUMENTS),
        MaskUnexpectedErrors,
        InvalidInputCodes,
        lambda: OperationPolicy(settings.graphql_max_cost, analyses),
        lambda: KeepValidatedQueries(prepared),
    ]
    schema = CommerceSchema(
        query=Query,
        mutation=Mutation,
        subscription=Subscription,
        types=[Product, ProductVariant, Order, User],
        extensions=extensions,
        config=StrawberryConfig(
            disable_field_suggestions=settings.is_production, scalar_map=SCALARS
        ),
    )
    schema.prepared_runner = PreparedRunner(
        schema, prepared, analyses, settings.graphql_max_cost, DirectPages(CACHED_DOCUMENTS)
    )
    return schema
