from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from commerce_content.app import create_app
from commerce_content.cli import MIGRATIONS
from commerce_content.settings import Settings
from fastapi import FastAPI
from servicekit.db.engine import to_sqlalchemy_url
from servicekit.testing import run_http_server
from servicekit.testing.service import ServiceUnderTest
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from tests.factories import bearer_for, make_user


def error_text(body: dict[str, Any]) -> str:
    """The resource API envelope: `{"error": {"code": ..., "message": ...}}`."""
    assert set(body["error"]) >= {"code", "message"}
    return str(body["error"]["message"])


@pytest.fixture(scope="session")
def service() -> ServiceUnderTest:
    return ServiceUnderTest(
        command="commerce-content",
        settings=Settings,
        create_app=create_app,
        migrations=MIGRATIONS,
        api_prefix="/api/v1",
        error_text=error_text,
        validation_status=400,
    )


@pytest.fixture(scope="session")
async def graphql_app(service_settings: Settings) -> AsyncIterator[FastAPI]:
    app = create_app(service_settings)
    async with run_http_server(app) as base_url:
        app.state.graphql_url = f"{base_url}/graphql"
        yield app


@pytest.fixture(scope="session")
async def general_graphql_url(service_settings: Settings) -> AsyncIterator[str]:
    """The same service with every request on the general path."""
    app = create_app(service_settings)
    app.state.graphql_schema.prepared_runner = None
    async with run_http_server(app) as base_url:
        yield f"{base_url}/graphql"


@pytest.fixture(scope="session")
def graphql_url(graphql_app: FastAPI) -> str:
    """/graphql of the service behind a real uvicorn server on 127.0.0.1."""
    return str(graphql_app.state.graphql_url)


@pytest.fixture
async def fuzz_headers(fuzz_settings: Settings) -> dict[str, str]:
    """Fuzzing as an admin user (JWT) holding the content API key, so every operation is
    reached past its authentication."""
    engine = create_async_engine(to_sqlalchemy_url(fuzz_settings.database_url), poolclass=NullPool)
    try:
        user_id = await make_user(engine, "admin")
    finally:
        await engine.dispose()
    return {
        **bearer_for(fuzz_settings, user_id, "admin"),
        "X-API-Key": fuzz_settings.content_api_key.get_secret_value(),
    }


@pytest.fixture
def fuzz_settings(fuzz_settings: Settings) -> Settings:
    """Fuzzing sends hundreds of requests a minute from one caller: not what it tests."""
    return fuzz_settings.model_copy(update={"rate_limit": "1000000/minute"})
