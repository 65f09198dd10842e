"""The schema and its operation rules, built once per app from the settings."""

from __future__ import annotations

from collections.abc import Callable

import strawberry
import structlog
from graphql import GraphQLError
from strawberry.extensions import (
    DisableIntrospection,
    MaxAliasesLimiter,
    MaxTokensLimiter,
    QueryDepthLimiter,
    SchemaExtension,
)
from strawberry.schema.config import StrawberryConfig
from strawberry.types import ExecutionContext

from commerce_content.graphql_api.extensions import (
    MaskUnexpectedErrors,
    OperationPolicy,
    is_unexpected,
)
from commerce_content.graphql_api.mutations import Mutation
from commerce_content.graphql_api.queries import Query
from commerce_content.graphql_api.scalars import SCALARS
from commerce_content.graphql_api.types import Order, Product, ProductVariant, User
from commerce_content.settings import Settings

logger = structlog.get_logger(__name__)


class CommerceSchema(strawberry.Schema):
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
    extensions: list[Callable[[], SchemaExtension]] = [
        lambda: QueryDepthLimiter(max_depth=settings.graphql_max_depth),
        lambda: MaxAliasesLimiter(max_alias_count=settings.graphql_max_aliases),
        lambda: MaxTokensLimiter(max_token_count=settings.graphql_max_tokens),
        MaskUnexpectedErrors,
        lambda: OperationPolicy(settings.graphql_max_cost),
    ]
    if settings.is_production:
        extensions.append(DisableIntrospection)
    return CommerceSchema(
        query=Query,
        mutation=Mutation,
        types=[Product, ProductVariant, Order, User],
        extensions=extensions,
        config=StrawberryConfig(
            disable_field_suggestions=settings.is_production, scalar_map=SCALARS
        ),
    )
