"""Key management over HTTP, the same in every service: who am I, list, create, revoke.

Keys are scoped to their owner: an admin key manages its own owner's keys, never another's.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum

from fastapi import APIRouter, Request, Response, status
from pydantic import BaseModel, EmailStr, Field

from servicekit.auth.api_keys import ISSUED_OVER_API, AccessLevel
from servicekit.auth.dependencies import AdminPrincipal, ReadPrincipal
from servicekit.auth.repository import ApiKeyRepository
from servicekit.db.engine import SessionDep
from servicekit.db.models import ApiKey
from servicekit.errors import Conflict, NotFound


class Caller(BaseModel):
    owner: str
    level: AccessLevel
    key_id: uuid.UUID | None


class ApiKeyRead(BaseModel):
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
    level: ApiIssuedLevel
    email: EmailStr | None = None
    description: str | None = Field(default=None, max_length=500)


class ApiKeyCreated(ApiKeyRead):
    key: str = Field(description="The key itself; shown only in this response")


def api_keys_router(error_model: type[BaseModel]) -> APIRouter:
    router = APIRouter(prefix="/api-keys", tags=["api-keys"])
    errors: dict[int | str, dict[str, object]] = {
        401: {"model": error_model, "description": "Missing or invalid key"},
        403: {"model": error_model, "description": "The key's level is too low"},
    }

    @router.get("/me", response_model=Caller, responses=errors)
    async def who_am_i(principal: ReadPrincipal) -> Caller:
        return Caller(owner=principal.owner, level=principal.level, key_id=principal.key_id)

    @router.get("", response_model=list[ApiKeyRead], responses=errors)
    async def list_keys(principal: AdminPrincipal, session: SessionDep) -> list[ApiKeyRead]:
        records = await ApiKeyRepository(session).list_for_owner(principal.owner)
        return [ApiKeyRead.of(record) for record in records]

    @router.post(
        "", response_model=ApiKeyCreated, status_code=status.HTTP_201_CREATED, responses=errors
    )
    async def create_key(
        body: ApiKeyCreate, principal: AdminPrincipal, session: SessionDep, request: Request
    ) -> ApiKeyCreated:
        record, plaintext = await ApiKeyRepository(session).create(
            prefix=request.app.state.settings.api_key_prefix,
            owner=principal.owner,
            level=AccessLevel(body.level.value),
            email=str(body.email) if body.email else principal.email,
            description=body.description,
        )
        return ApiKeyCreated(**ApiKeyRead.of(record).model_dump(), key=plaintext)

    @router.delete(
        "/{key_id:uuid}",
        status_code=status.HTTP_204_NO_CONTENT,
        response_class=Response,
        responses={
            **errors,
            404: {"model": error_model, "description": "No such key"},
            409: {"model": error_model, "description": "The key tried to revoke itself"},
        },
    )
    async def revoke_key(key_id: uuid.UUID, principal: AdminPrincipal, session: SessionDep) -> None:
        repository = ApiKeyRepository(session)
        record = await repository.get_for_owner(key_id, principal.owner)
        if record is None:
            raise NotFound("API key not found")
        if record.id == principal.key_id:
            raise Conflict("A key cannot revoke itself; use another admin key")
        await repository.revoke(record)

    return router
