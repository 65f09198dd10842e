"""The caller of the resource API: a bearer HS256 JWT (`sub` = user id, `role`), or an API key
(its level maps to a role: admin -> ADMIN, write -> MANAGER, read -> USER)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from servicekit.auth.api_keys import AccessLevel
from servicekit.auth.dependencies import BearerCredentials, principal_from_api_key
from servicekit.auth.jwt import InvalidToken, JWTCodec
from servicekit.web.params import MAX_DB_INT
from servicekit.web_session import SessionDep
from sqlmodel.ext.asyncio.session import AsyncSession

from commerce_content.errors import NotAuthenticated, NotPermitted
from commerce_content.identity.repository import UserRepository
from commerce_content.identity.roles import Role
from commerce_content.settings import Settings

LEVEL_ROLES = {
    AccessLevel.ADMIN: Role.ADMIN,
    AccessLevel.WRITE: Role.MANAGER,
    AccessLevel.READ: Role.USER,
}


@dataclass(frozen=True)
class Caller:
    subject: str  # the user id of a JWT, or the owner of an API key
    role: Role
    user_id: int | None  # set when the subject is one of our users
    via: str  # "jwt" or "api_key"

    def require(self, role: Role) -> None:
        if not self.role.allows(role):
            raise NotPermitted(f"This operation needs the {role.value} role")


def jwt_codec(settings: Settings) -> JWTCodec:
    return JWTCodec(
        settings.jwt_secret.get_secret_value(),
        issuer=settings.jwt_issuer,
        audience=settings.jwt_audience,
        ttl_seconds=settings.jwt_ttl_seconds,
    )


def user_id_of(subject: object) -> int:
    """A JWT's `sub` is a user id (spec, part C): ASCII digits naming a row id. Anything else
    ("²" passes str.isdigit, 5,000 digits exceed int(), 20 digits exceed the column) makes
    the token invalid."""
    if (
        not isinstance(subject, str)
        or not 1 <= len(subject) <= len(str(MAX_DB_INT))
        or not (subject.isascii() and subject.isdigit())
        or not 1 <= int(subject) <= MAX_DB_INT
    ):
        raise InvalidToken("sub is not a user id")
    return int(subject)


def caller_from_jwt(token: str, settings: Settings) -> Caller:
    claims = jwt_codec(settings).verify(token)
    try:
        role = Role(str(claims.get("role", Role.USER.value)).lower())
    except ValueError as exc:
        raise InvalidToken("unknown role") from exc
    user_id = user_id_of(claims.get("sub"))
    return Caller(str(user_id), role, user_id, "jwt")


async def known_caller_from_jwt(token: str, settings: Settings, session: AsyncSession) -> Caller:
    """`caller_from_jwt`, whose subject must also name one of our users: a validly signed
    token for a user id with no row (deleted, or from another database) proves no one, so it
    is invalid (401) wherever tokens are accepted, never a user made on first use nor a
    foreign-key failure further on (GraphQL's `createOrder` was a 500)."""
    caller = caller_from_jwt(token, settings)
    if caller.user_id is None or not await UserRepository(session).exists(caller.user_id):
        raise InvalidToken("sub names no user")
    return caller


async def identify(token: str, settings: Settings, session: AsyncSession) -> Caller:
    """The caller behind a bearer token: a JWT (three dot-separated parts) or an API key."""
    if token.count(".") == 2:
        try:
            return await known_caller_from_jwt(token, settings, session)
        except InvalidToken as exc:
            raise NotAuthenticated("Invalid token") from exc
    principal = await principal_from_api_key(session, token)
    if principal is None:
        raise NotAuthenticated("Invalid token")
    return Caller(principal.owner, LEVEL_ROLES[principal.level], None, "api_key")


async def authenticate(
    request: Request, session: SessionDep, credentials: BearerCredentials
) -> Caller:
    if credentials is None or not credentials.credentials:
        raise NotAuthenticated("Missing bearer token")
    return await identify(credentials.credentials, request.app.state.settings, session)


def require_role(role: Role) -> Callable[..., Awaitable[Caller]]:
    async def dependency(caller: Annotated[Caller, Depends(authenticate)]) -> Caller:
        caller.require(role)
        return caller

    return dependency


AnyCaller = Annotated[Caller, Depends(require_role(Role.GUEST))]
UserCaller = Annotated[Caller, Depends(require_role(Role.USER))]
ManagerCaller = Annotated[Caller, Depends(require_role(Role.MANAGER))]
