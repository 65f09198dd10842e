"""Per-client rate limits with the `limits` library: in memory by default, or a shared store
(`memcached://`, `redis://`, ...) when several replicas must count together."""

from __future__ import annotations

import math
import time

from fastapi import Request
from fastapi.security.utils import get_authorization_scheme_param
from limits import parse
from limits.aio.storage import Storage
from limits.aio.strategies import MovingWindowRateLimiter
from limits.storage import storage_from_string
from servicekit.auth.dependencies import principal_from_api_key
from servicekit.auth.jwt import InvalidToken
from servicekit.web_session import SessionDep
from sqlmodel.ext.asyncio.session import AsyncSession

from commerce_content.errors import TooManyRequests
from commerce_content.identity.dependencies import jwt_codec
from commerce_content.settings import Settings


def async_storage(storage_url: str) -> Storage:
    # The async variant of any scheme is named `async+<scheme>`.
    url = storage_url if storage_url.startswith("async+") else f"async+{storage_url}"
    storage = storage_from_string(url)
    assert isinstance(storage, Storage)
    return storage


class RequestLimiter:
    def __init__(self, rule: str, storage_url: str) -> None:
        self.limit = parse(rule)
        self.limiter = MovingWindowRateLimiter(async_storage(storage_url))

    async def check(self, key: str) -> None:
        if await self.limiter.hit(self.limit, key):
            return
        stats = await self.limiter.get_window_stats(self.limit, key)
        retry_after = max(1, math.ceil(stats.reset_time - time.time()))
        raise TooManyRequests(
            f"Rate limit of {self.limit} exceeded; retry in {retry_after} s",
            headers={"Retry-After": str(retry_after)},
        )


def subject_key(via: str, subject: str) -> str:
    """The bucket of a caller known by its credential: an API key's owner or a token's subject,
    in separate namespaces."""
    return f"{via}:{subject}"


def client_address(host: str | None) -> str:
    return f"ip:{host or 'unknown'}"


async def verified_subject(token: str, settings: Settings, session: AsyncSession) -> str | None:
    """The bucket of the caller a bearer token proves, or None for a token that proves no one.

    Only the subject is read (not the role or user), so a token the endpoint later refuses for
    another reason is still counted as its caller."""
    if token.count(".") == 2:
        try:
            claims = jwt_codec(settings).verify(token)
        except InvalidToken:
            return None
        return subject_key("jwt", str(claims["sub"]))
    principal = await principal_from_api_key(session, token)
    return None if principal is None else subject_key("api_key", principal.owner)


async def client_key(request: Request, session: AsyncSession, token: str | None) -> str:
    """Valid callers by who they are, wherever they come from; anonymous and invalid ones by
    address, so varying a bogus header buys nothing."""
    if token and (subject := await verified_subject(token, request.app.state.settings, session)):
        return subject
    return client_address(request.client.host if request.client else None)


def bearer_token(authorization: str | None) -> str | None:
    # Read here, not through the security scheme, so public endpoints are not documented as
    # needing a credential; the scheme is case-insensitive, as the authentication's is.
    scheme, token = get_authorization_scheme_param(authorization)
    return token if scheme.lower() == "bearer" and token else None


async def enforce_rate_limit(request: Request, session: SessionDep) -> None:
    limiter: RequestLimiter = request.app.state.request_limiter
    token = bearer_token(request.headers.get("authorization"))
    await limiter.check(await client_key(request, session, token))
