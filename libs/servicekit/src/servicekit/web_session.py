"""The per-request database session: FastAPI glue over `servicekit.db`. A module of its own,
beside `servicekit.web` rather than in it, because `servicekit.auth`'s key check shares the
request's session and the web package stands on auth (the sign-in pages, the key cache)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession


async def get_session(request: Request) -> AsyncIterator[AsyncSession]:
    """One transaction per request: committed when the endpoint returns, rolled back on error.

    Declared with scope="function" below so the commit happens before the response is sent: a
    client never sees success for a change that failed to commit.
    """
    factory: async_sessionmaker[AsyncSession] = request.app.state.session_factory
    async with factory() as session, session.begin():
        yield session


SessionDep = Annotated[AsyncSession, Depends(get_session, scope="function")]
