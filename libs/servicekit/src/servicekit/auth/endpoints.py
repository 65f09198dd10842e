"""Key management over HTTP, the same in every service: who am I, list, create, revoke.

Keys are scoped to their owner: an admin key manages its own owner's keys, never another's.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response, status
from pydantic import BaseModel, ConfigDict, EmailStr, Field

from servicekit.auth.api_keys import ISSUED_OVER_API, AccessLevel
from servicekit.auth.dependencies import AdminPrincipal, ReadPrincipal
from servicekit.auth.key_cache import ApiKeyCache
from servicekit.auth.service import ApiKeyNotFound, ApiKeyService, KeyRevokesItself
from servicekit.db.models import ApiKey
from servicekit.errors import Forbidden, ServiceError, Unauthorized, error_responses
from servicekit.web_session import SessionDep

_KEY_EXAMPLE: dict[str, Any] = {
    "id": "0b8f2d4e-6a1c-4e55-9f0e-3c2a7d9b1e42",
    "owner": "acme",
    "level": "write",
    "key_prefix": "whk_3kQ9",
    "email": "ops@acme.example",
    "description": "CI deploys",
    "created_at": "2026-11-23T12:00:00Z",
}


class Caller(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"owner": "acme", "level": "admin", "key_id": _KEY_EXAMPLE["id"]}]
        }
    )

    owner: str
    level: AccessLevel
    key_id: uuid.UUID | None


class ApiKeyRead(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [_KEY_EXAMPLE]})

    id: uuid.UUID
    owner: str
    level: AccessLevel
    key_prefix: str = Field(description="The first characters of the key, to recognise it")
    email: str | None
    description: str | None
    created_at: datetime

    @classmethod
    def of(cls, record: ApiKey) -> ApiKeyRead:
        return cls(
            id=record.id,
            owner=record.owner,
            level=AccessLevel(record.level),
            key_prefix=record.key_prefix,
            email=record.email,
            description=record.description,
            created_at=record.created_at,
        )


class ApiIssuedLevel(StrEnum):
    """The levels an owner may issue itself (ISSUED_OVER_API); `operator` comes from the CLI
    alone, and asking for it here is a 422."""

    READ = "read"
    WRITE = "write"
    ADMIN = "admin"


assert {level.value for level in ApiIssuedLevel} == {level.value for level in ISSUED_OVER_API}


class ApiKeyCreate(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"level": "write", "description": "CI deploys"}]}
    )

    level: ApiIssuedLevel
    email: EmailStr | None = None
    description: str | None = Field(default=None, max_length=500)


class ApiKeyCreated(ApiKeyRead):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{**_KEY_EXAMPLE, "key": "whk_3kQ9…(shown once)"}]}
    )

    key: str = Field(description="The key itself; shown only in this response")


async def get_api_key_service(session: SessionDep, request: Request) -> ApiKeyService:
    return ApiKeyService(session, key_prefix=request.app.state.settings.api_key_prefix)


ApiKeyServiceDep = Annotated[ApiKeyService, Depends(get_api_key_service)]


def api_keys_router(
    error_model: type[BaseModel],
    example_of: Callable[[ServiceError], dict[str, Any]] | None = None,
) -> APIRouter:
    """The key-management operations, answering errors in the service's envelope."""
    router = APIRouter(prefix="/api-keys", tags=["api-keys"])

    def declared(*errors: type[ServiceError]) -> dict[int | str, dict[str, Any]]:
        return error_responses(error_model, Unauthorized, Forbidden, *errors, example_of=example_of)

    @router.get(
        "/me",
        response_model=Caller,
        responses=declared(),
        summary="Who am I",
        description="The owner and access level of the key this request presents: a quick "
        "way to check a key works and what it may do.",
    )
    async def who_am_i(principal: ReadPrincipal) -> Caller:
        return Caller(owner=principal.owner, level=principal.level, key_id=principal.key_id)

    @router.get(
        "",
        response_model=list[ApiKeyRead],
        responses=declared(),
        summary="List keys",
        description="Every active key of the caller's owner (admin). Keys are stored as hashes: "
        "only their first characters (`key_prefix`) are shown.",
    )
    async def list_keys(principal: AdminPrincipal, service: ApiKeyServiceDep) -> list[ApiKeyRead]:
        return [ApiKeyRead.of(record) for record in await service.list_for(principal.owner)]

    @router.post(
        "",
        response_model=ApiKeyCreated,
        status_code=status.HTTP_201_CREATED,
        responses=declared(),
        summary="Issue a key",
        description="A new key for the caller's owner (admin), at `read`, `write` or `admin` "
        "level. The plaintext key is in this response only; store it now. `operator` keys come "
        "from the command line alone.",
    )
    async def create_key(
        body: ApiKeyCreate, principal: AdminPrincipal, service: ApiKeyServiceDep
    ) -> ApiKeyCreated:
        record, plaintext = await service.issue(
            principal.owner,
            level=AccessLevel(body.level.value),
            email=str(body.email) if body.email else principal.email,
            description=body.description,
        )
        return ApiKeyCreated(**ApiKeyRead.of(record).model_dump(), key=plaintext)

    @router.delete(
        "/{key_id:uuid}",
        status_code=status.HTTP_204_NO_CONTENT,
        response_class=Response,
        responses=declared(ApiKeyNotFound, KeyRevokesItself),
        summary="Revoke a key",
        description="Revokes one of the caller's owner's keys (admin); it stops working at "
        "once (where the service remembers keys for `API_KEY_CACHE_SECONDS`, its other "
        "processes stop accepting it within those seconds). A key cannot revoke itself, so an "
        "owner always keeps one admin key.",
    )
    async def revoke_key(
        key_id: uuid.UUID, principal: AdminPrincipal, service: ApiKeyServiceDep, request: Request
    ) -> None:
        await service.revoke(principal.owner, key_id, caller_key_id=principal.key_id)
        cache: ApiKeyCache | None = getattr(request.app.state, "api_key_cache", None)
        if cache is not None:
            cache.forget(key_id)

    return router
