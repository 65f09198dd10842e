"""The schema and its operation rules, built once per app from the settings."""

from __future__ import annotations

from collections.abc import Callable
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
from strawberry.types import ExecutionContext

from commerce_content.graphql_api.adapter import core_schema, executor_for
from commerce_content.graphql_api.extensions import (
    InvalidInputCodes,
    MaskUnexpectedErrors,
    OperationPolicy,
    OperationSpan,
    RefuseUnstorableLiterals,
    is_unexpected,
)
from commerce_content.graphql_api.mutations import Mutation
from commerce_content.graphql_api.queries import Query
from commerce_content.graphql_api.scalars import SCALARS
from commerce_content.graphql_api.types import Order, Product, ProductVariant, User
from commerce_content.settings import Settings

logger = structlog.get_logger(__name__)
CACHED_DOCUMENTS = 512


class CommerceSchema(strawberry.Schema):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Built from the finished schema, so it can only be set afterwards.
        self.execution_context_class = executor_for(core_schema(self))

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
    extensions: list[Callable[[], SchemaExtension]] = [
        # First, so the operation's span is current for everything the others do.
        OperationSpan,
        lambda: MaxTokensLimiter(max_token_count=settings.graphql_max_tokens),
        lambda: AddValidationRules(rules),
        lambda: ParserCache(maxsize=CACHED_DOCUMENTS),
        lambda: ValidationCache(maxsize=CACHED_DOCUMENTS),
        MaskUnexpectedErrors,
        InvalidInputCodes,
        lambda: OperationPolicy(settings.graphql_max_cost),
    ]
    return CommerceSchema(
        query=Query,
        mutation=Mutation,
        types=[Product, ProductVariant, Order, User],
        extensions=extensions,
        config=StrawberryConfig(
            disable_field_suggestions=settings.is_production, scalar_map=SCALARS
        ),
    )
