"""The schema's directives, declared in the SDL and enforced at run time.

- `@auth(requires: Role = USER)`: the field resolves only for callers of that role or above
  (ADMIN > MANAGER > USER > GUEST); otherwise the field is null with an error whose
  `extensions.code` is `UNAUTHENTICATED` (no credentials) or `FORBIDDEN` (a lower role).
- `@rateLimit(max, window)`: per caller (or client address when anonymous) and per field.
- `@cacheControl(maxAge, scope)`: read by `cache_policy` after the operation (Apollo's rules).

`guarded_field` puts a directive in the SDL and its enforcing field extension on the field
together, so the two never disagree.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeVar, cast

import strawberry
from graphql import GraphQLError
from limits import (
    RateLimitItem,
    RateLimitItemPerDay,
    RateLimitItemPerHour,
    RateLimitItemPerMinute,
    RateLimitItemPerSecond,
)
from limits.aio.strategies import MovingWindowRateLimiter
from strawberry.extensions import FieldExtension
from strawberry.schema_directive import Location
from strawberry.types import Info

from commerce_content.identity.roles import Role as IdentityRole
from commerce_content.rate_limit.limiter import async_storage

ResolverT = TypeVar("ResolverT", bound=Callable[..., Any])

Role = strawberry.enum(
    IdentityRole, name="Role", description="Roles, ordered: ADMIN > MANAGER > USER > GUEST."
)


@strawberry.enum(description="Who may keep a cached response: any cache, or the caller's own.")
class CacheControlScope(Enum):
    PUBLIC = "PUBLIC"
    PRIVATE = "PRIVATE"


@strawberry.schema_directive(
    locations=[Location.FIELD_DEFINITION],
    name="auth",
    description="Only callers with this role or a higher one may read the field.",
)
class Auth:
    requires: IdentityRole | None = IdentityRole.USER


@strawberry.schema_directive(
    locations=[Location.FIELD_DEFINITION],
    name="rateLimit",
    description='At most `max` calls of the field per caller in `window` ("10s", "1m", "1h").',
)
class RateLimit:
    max: int
    window: str


@strawberry.schema_directive(
    locations=[Location.FIELD_DEFINITION, Location.OBJECT],
    name="cacheControl",
    description="How long, and for whom, a response that includes this may be cached.",
)
class CacheControl:
    max_age: int | None = strawberry.UNSET
    scope: CacheControlScope | None = strawberry.UNSET


class Errors:
    UNAUTHENTICATED = "UNAUTHENTICATED"
    FORBIDDEN = "FORBIDDEN"
    RATE_LIMITED = "RATE_LIMITED"


def check_role(viewer_role: IdentityRole | None, required: IdentityRole) -> None:
    """`viewer_role` is None for an anonymous caller."""
    if viewer_role is not None and viewer_role.allows(required):
        return
    if viewer_role is None and required != IdentityRole.GUEST:
        raise GraphQLError("Authentication required", extensions={"code": Errors.UNAUTHENTICATED})
    if viewer_role is not None:
        raise GraphQLError(
            f"This field needs the {required.name} role",
            extensions={"code": Errors.FORBIDDEN, "requires": required.name},
        )


class AuthExtension(FieldExtension):
    def __init__(self, requires: IdentityRole) -> None:
        self.requires = requires

    def resolve(self, next_: Callable[..., Any], source: Any, info: Info, **kwargs: Any) -> Any:
        check_role(info.context.viewer_role, self.requires)
        return next_(source, info, **kwargs)

    async def resolve_async(
        self, next_: Callable[..., Awaitable[Any]], source: Any, info: Info, **kwargs: Any
    ) -> Any:
        check_role(info.context.viewer_role, self.requires)
        return await next_(source, info, **kwargs)


WINDOW = re.compile(r"^([1-9]\d{0,5})([smhd])$")
_ITEMS: dict[str, type[RateLimitItem]] = {
    "s": RateLimitItemPerSecond,
    "m": RateLimitItemPerMinute,
    "h": RateLimitItemPerHour,
    "d": RateLimitItemPerDay,
}


def rate_limit_item(max_calls: int, window: str) -> RateLimitItem:
    """`window` is a count and a unit: `10s`, `1m`, `2h`, `1d`."""
    match = WINDOW.match(window)
    if match is None or max_calls < 1:
        raise ValueError(f"@rateLimit needs max >= 1 and a window like '10s' or '1m': {window!r}")
    return _ITEMS[match.group(2)](max_calls, int(match.group(1)))


@dataclass(frozen=True)
class FieldRateLimiter:
    limiter: MovingWindowRateLimiter

    async def hit(self, item: RateLimitItem, key: str) -> None:
        if await self.limiter.hit(item, key):
            return
        stats = await self.limiter.get_window_stats(item, key)
        retry_after = max(1, math.ceil(stats.reset_time - time.time()))
        raise GraphQLError(
            f"Rate limit of {item.amount} per {item.multiples}"
            f" {item.GRANULARITY.name} exceeded; retry in {retry_after} s",
            extensions={"code": Errors.RATE_LIMITED, "retryAfter": retry_after},
        )


def field_rate_limiter(storage_url: str) -> FieldRateLimiter:
    """Counts in the same store as the REST limits, so replicas can share them."""
    return FieldRateLimiter(MovingWindowRateLimiter(async_storage(storage_url)))


class RateLimitExtension(FieldExtension):
    def __init__(self, max_calls: int, window: str) -> None:
        self.item = rate_limit_item(max_calls, window)

    async def resolve_async(
        self, next_: Callable[..., Awaitable[Any]], source: Any, info: Info, **kwargs: Any
    ) -> Any:
        # The parent type from the field's path (graphql-core's public Path).
        key = f"gql:{info.path.typename}.{info.field_name}:{info.context.rate_key}"
        await info.context.field_limiter.hit(self.item, key)
        return await next_(source, info, **kwargs)


def guarded_field(
    *,
    auth: IdentityRole | None = None,
    rate_limit: tuple[int, str] | None = None,
    cache: CacheControl | None = None,
    description: str | None = None,
    deprecation_reason: str | None = None,
) -> Callable[[ResolverT], ResolverT]:
    """A strawberry field decorator with its directives in the SDL and their enforcement
    attached."""
    directives: list[object] = []
    extensions: list[FieldExtension] = []
    if auth is not None:
        directives.append(Auth(requires=auth))
        extensions.append(AuthExtension(auth))
    if rate_limit is not None:
        directives.append(RateLimit(max=rate_limit[0], window=rate_limit[1]))
        extensions.append(RateLimitExtension(*rate_limit))
    if cache is not None:
        directives.append(cache)
    field: Any = strawberry.field(
        directives=directives,
        extensions=extensions,
        description=description,
        deprecation_reason=deprecation_reason,
    )
    return cast("Callable[[ResolverT], ResolverT]", field)
