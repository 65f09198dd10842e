"""FastAPI dependencies turning `Authorization: Bearer <key>` into a principal, or 401/403."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from servicekit.auth.api_keys import AccessLevel, hash_api_key
from servicekit.auth.key_cache import ApiKeyCache
from servicekit.auth.principal import Principal as Principal  # where callers take it
from servicekit.auth.repository import ApiKeyRepository
from servicekit.errors import Unauthorized
from servicekit.web_session import SessionDep

bearer_scheme = HTTPBearer(auto_error=False, description="An API key: `Bearer <key>`")
BearerCredentials = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)]


async def principal_from_api_key(
    session: SessionDep, token: str, cache: ApiKeyCache | None = None
) -> Principal | None:
    """The key's principal, or None when no active key is `token`; through `cache` when the
    service keeps one (then the session is not used while the key is remembered)."""
    key_hash = hash_api_key(token)
    if cache is not None and (remembered := cache.get(key_hash)) is not None:
        return remembered
    record = await ApiKeyRepository(session).find_active_key_by_hash(key_hash)
    if record is None:
        return None
    principal = Principal(
        owner=record.owner, level=AccessLevel(record.level), key_id=record.id, email=record.email
    )
    if cache is not None:
        cache.put(key_hash, principal)
    return principal


# A service may accept bearer tokens besides its API keys (OAuth2 access tokens, say): it puts
# a verifier on `app.state.bearer_verifier`, returning a principal or None.
BearerVerifier = Callable[[str], Awaitable["Principal | None"]]


async def authenticate(
    request: Request, session: SessionDep, credentials: BearerCredentials
) -> Principal:
    return await _authenticated(request, session, _token(credentials))


async def authenticate_without_session(
    request: Request, credentials: BearerCredentials
) -> Principal:
    """`authenticate` for an endpoint that has no use for the request's session (the single
    event's group commit writes in a session of its own): a key the process remembers costs
    no session at all, and any other is looked up in a short one of its own."""
    token = _token(credentials)
    cache: ApiKeyCache | None = getattr(request.app.state, "api_key_cache", None)
    if cache is not None and (remembered := cache.get(hash_api_key(token))) is not None:
        return remembered
    factory: async_sessionmaker[AsyncSession] = request.app.state.session_factory
    async with factory() as session:
        return await _authenticated(request, session, token)


def _token(credentials: HTTPAuthorizationCredentials | None) -> str:
    if credentials is None or not credentials.credentials:
        raise Unauthorized("Missing bearer credentials")
    return credentials.credentials


async def _authenticated(request: Request, session: AsyncSession, token: str) -> Principal:
    cache: ApiKeyCache | None = getattr(request.app.state, "api_key_cache", None)
    principal = await principal_from_api_key(session, token, cache)
    verifier: BearerVerifier | None = getattr(request.app.state, "bearer_verifier", None)
    if principal is None and verifier is not None and token.count(".") == 2:
        principal = await verifier(token)
    if principal is None:
        raise Unauthorized("Invalid API key or token")
    return principal


def require_level(level: AccessLevel) -> Callable[..., Awaitable[Principal]]:
    """A dependency that authenticates the caller and checks their level."""

    async def dependency(principal: Annotated[Principal, Depends(authenticate)]) -> Principal:
        principal.require(level)
        return principal

    return dependency


async def _admin_without_session(
    principal: Annotated[Principal, Depends(authenticate_without_session)],
) -> Principal:
    principal.require(AccessLevel.ADMIN)
    return principal


ReadPrincipal = Annotated[Principal, Depends(require_level(AccessLevel.READ))]
WritePrincipal = Annotated[Principal, Depends(require_level(AccessLevel.WRITE))]
AdminPrincipal = Annotated[Principal, Depends(require_level(AccessLevel.ADMIN))]
# The same, for an endpoint that uses no session of the request's (authenticate_without_session).
AdminPrincipalWithoutSession = Annotated[Principal, Depends(_admin_without_session)]
