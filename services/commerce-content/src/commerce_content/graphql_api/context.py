"""What every resolver can reach: the caller, one database session, the DataLoaders, and
the dynamic cache hints."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import cached_property

from fastapi import BackgroundTasks
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession
from starlette.requests import HTTPConnection
from strawberry.dataloader import DataLoader
from strawberry.types import Info

from commerce_content.graphql_api.directives import CacheControlScope, FieldRateLimiter
from commerce_content.graphql_api.live import EventBroker
from commerce_content.identity.dependencies import Caller
from commerce_content.identity.roles import Role
from commerce_content.models import OrderItem, Product
from commerce_content.orders.repository import OrderRepository
from commerce_content.products.repository import ProductRepository, VariantRecord
from commerce_content.settings import Settings


@dataclass
class DynamicCacheHints:
    """Restrictions resolvers add at run time (Apollo's `info.cacheControl.setCacheHint`)."""

    max_age: int | None = None
    private: bool = False

    def restrict(
        self, *, max_age: int | None = None, scope: CacheControlScope | None = None
    ) -> None:
        if max_age is not None:
            self.max_age = max_age if self.max_age is None else min(self.max_age, max_age)
        if scope == CacheControlScope.PRIVATE:
            self.private = True


@dataclass
class GraphQLContext:
    # The HTTP request, or the WebSocket of a subscription.
    request: HTTPConnection
    settings: Settings
    # The request's transaction; None on a WebSocket, which lives too long to hold a
    # connection of the pool: each use then has a session of its own (`db`).
    session: AsyncSession | None
    background_tasks: BackgroundTasks
    caller: Caller | None
    field_limiter: FieldRateLimiter
    cache_hints: DynamicCacheHints = field(default_factory=DynamicCacheHints)
    # Set after a query that ran without errors: the response's Cache-Control value.
    cache_control: str | None = None
    # graphql-core resolves sibling fields concurrently; one AsyncSession runs one statement
    # at a time.
    db_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    session_factory: async_sessionmaker[AsyncSession] | None = None
    # Subscriptions: the process's event broker, and what the client sent in
    # `connection_init` (set by strawberry's protocol handler).
    broker: EventBroker | None = None
    connection_params: dict[str, object] | None = None

    # Made when first used: most requests (a page of products) use none of them.
    @cached_property
    def products_by_id(self) -> DataLoader[int, Product | None]:
        return DataLoader(self._load_products)

    @cached_property
    def variants_by_product(self) -> DataLoader[int, list[VariantRecord]]:
        return DataLoader(self._load_variants)

    @cached_property
    def lines_by_order(self) -> DataLoader[uuid.UUID, list[OrderItem]]:
        return DataLoader(self._load_order_lines)

    @property
    def viewer_role(self) -> Role | None:
        return self.caller.role if self.caller is not None else None

    @property
    def sees_drafts(self) -> bool:
        """Managers see unpublished products; such answers are never shared by caches."""
        return self.caller is not None and self.caller.role.allows(Role.MANAGER)

    @property
    def rate_key(self) -> str:
        if self.caller is not None:
            return f"{self.caller.via}:{self.caller.subject}"
        host = self.request.client.host if self.request.client else "unknown"
        return f"ip:{host}"

    @asynccontextmanager
    async def db(self) -> AsyncIterator[AsyncSession]:
        if self.session is None:
            assert self.session_factory is not None
            async with self.session_factory() as session:
                yield session
            return
        async with self.db_lock:
            yield self.session

    async def _load_products(self, ids: Sequence[int]) -> list[Product | None]:
        async with self.db() as session:
            found = await ProductRepository(session).by_ids(
                ids, include_unpublished=self.sees_drafts
            )
        return [found.get(i) for i in ids]

    async def _load_order_lines(self, order_ids: Sequence[uuid.UUID]) -> list[list[OrderItem]]:
        async with self.db() as session:
            grouped = await OrderRepository(session).lines_of(order_ids)
        return [grouped.get(i, []) for i in order_ids]

    async def _load_variants(self, product_ids: Sequence[int]) -> list[list[VariantRecord]]:
        async with self.db() as session:
            grouped = await ProductRepository(session).variants_of(product_ids)
        return [grouped.get(i, []) for i in product_ids]


# What resolvers declare as their `info` parameter.
Context = Info[GraphQLContext, None]
