from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import PlainTextResponse
from pydantic import BaseModel
from servicekit.auth import AccessLevel
from servicekit.auth.dependencies import ReadPrincipal, WritePrincipal
from servicekit.auth.endpoints import api_keys_router
from servicekit.auth.repository import ApiKeyRepository
from servicekit.db.engine import create_session_factory
from servicekit.errors import BadRequest, Conflict, error_responses
from servicekit.runtime import NatsConnection
from servicekit.settings import ServiceSettings
from servicekit.testing import serve_app
from servicekit.testing.openapi_docs import undocumented_operations
from servicekit.web.app import create_service_app
from servicekit.web.errors import FlatErrorBody, flat_error_body, render_flat_error
from sqlalchemy.ext.asyncio import AsyncEngine


class ErrorBody(BaseModel):
    error: str
    code: str


class Echo(BaseModel):
    name: str
    count: int


def build_app(settings: ServiceSettings) -> Any:
    app = create_service_app(
        settings,
        title="example",
        description="servicekit test app",
        version="0.0.1",
        render_error=render_flat_error,
        max_body_bytes=1024,
    )
    router = APIRouter()

    @router.get("/whoami")
    async def whoami(principal: ReadPrincipal) -> dict[str, str]:
        return {"owner": principal.owner, "level": principal.level.value}

    @router.post("/things")
    async def create_thing(body: Echo, principal: WritePrincipal) -> Echo:
        return body

    @router.get("/conflict")
    async def conflict() -> None:
        raise Conflict("That already exists", extra={"existing_id": 3})

    @router.get("/boom")
    async def boom() -> None:
        raise RuntimeError("internal detail that must not leak")

    @router.get("/download")
    async def download() -> PlainTextResponse:
        return PlainTextResponse(
            "a,b\r\n", headers={"Content-Disposition": 'attachment; filename="x.csv"'}
        )

    @router.get("/publish")
    async def publish() -> None:
        # A connection never started is one whose NATS is down.
        await NatsConnection(settings, None).client.publish("events.test", b"{}")

    app.include_router(router)
    app.include_router(api_keys_router(ErrorBody))
    return app


@pytest.fixture
async def client(kit_settings: ServiceSettings) -> AsyncIterator[httpx.AsyncClient]:
    async with serve_app(build_app(kit_settings)) as http:
        yield http


async def make_key(engine: AsyncEngine, level: AccessLevel, owner: str = "acme") -> str:
    async with create_session_factory(engine)() as session, session.begin():
        _, plaintext = await ApiKeyRepository(session).create(
            prefix="tst", owner=owner, level=level
        )
    return plaintext


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def test_missing_authorization_gets_401_in_the_envelope(client: httpx.AsyncClient) -> None:
    response = await client.get("/whoami")
    assert response.status_code == 401
    assert response.json() == {"error": "Missing bearer credentials", "code": "unauthorized"}
    assert response.headers["www-authenticate"] == "Bearer"


async def test_wrong_key_gets_401(client: httpx.AsyncClient) -> None:
    response = await client.get("/whoami", headers=bearer("tst_not-a-real-key"))
    assert response.status_code == 401
    assert response.json()["error"] == "Invalid API key or token"


async def test_too_low_a_level_gets_403(client: httpx.AsyncClient, db_engine: AsyncEngine) -> None:
    key = await make_key(db_engine, AccessLevel.READ)
    response = await client.post("/things", json={"name": "a", "count": 1}, headers=bearer(key))
    assert response.status_code == 403
    assert response.json()["code"] == "forbidden"


async def test_valid_key_identifies_its_owner(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    key = await make_key(db_engine, AccessLevel.ADMIN, owner="globex")
    response = await client.get("/whoami", headers=bearer(key))
    assert response.status_code == 200
    assert response.json() == {"owner": "globex", "level": "admin"}


async def test_typed_error_is_rendered_with_its_status_and_extra_members(
    client: httpx.AsyncClient,
) -> None:
    response = await client.get("/conflict")
    assert response.status_code == 409
    assert response.json() == {"error": "That already exists", "code": "conflict", "existing_id": 3}


async def test_unexpected_error_is_a_500_without_internals(client: httpx.AsyncClient) -> None:
    response = await client.get("/boom")
    assert response.status_code == 500
    assert response.json() == {"error": "Internal server error", "code": "internal_error"}


async def test_the_event_bus_not_connected_is_a_503_in_the_envelope(
    client: httpx.AsyncClient,
) -> None:
    response = await client.get("/publish")
    assert response.status_code == 503
    assert response.json() == {"error": "The event bus is not reachable yet", "code": "unavailable"}


async def test_malformed_json_is_a_4xx_in_the_envelope(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    key = await make_key(db_engine, AccessLevel.WRITE)
    response = await client.post(
        "/things",
        content=b"{not json",
        headers={**bearer(key), "content-type": "application/json"},
    )
    assert response.status_code == 422
    assert response.json()["code"] == "validation_error"


async def test_wrong_types_are_a_4xx_naming_the_field(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    key = await make_key(db_engine, AccessLevel.WRITE)
    response = await client.post(
        "/things", json={"name": "a", "count": "many"}, headers=bearer(key)
    )
    assert response.status_code == 422
    assert "body.count" in response.json()["error"]


async def test_body_over_the_limit_gets_413(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    key = await make_key(db_engine, AccessLevel.WRITE)
    response = await client.post(
        "/things", json={"name": "x" * 2000, "count": 1}, headers=bearer(key)
    )
    assert response.status_code == 413
    assert response.json()["code"] == "payload_too_large"


async def test_unknown_route_is_a_404_in_the_envelope(client: httpx.AsyncClient) -> None:
    response = await client.get("/nowhere")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


async def test_health_and_readiness_answer(client: httpx.AsyncClient) -> None:
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    for _ in range(50):
        ready = await client.get("/readyz")
        if ready.status_code == 200:
            break
    assert ready.status_code == 200
    assert ready.json() == {"status": "ready", "checks": {"database": True, "nats": True}}


async def test_readiness_is_503_when_the_database_is_unreachable(
    kit_settings: ServiceSettings,
) -> None:
    broken = kit_settings.model_copy(
        update={"database_url": "postgresql://postgres@127.0.0.1:1/none"}
    )
    async with serve_app(build_app(broken)) as http:
        response = await http.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["database"] is False


async def test_request_id_is_echoed_or_generated(client: httpx.AsyncClient) -> None:
    given = await client.get("/healthz", headers={"X-Request-ID": "abc-123"})
    assert given.headers["x-request-id"] == "abc-123"
    generated = await client.get("/healthz", headers={"X-Request-ID": "bad id with spaces"})
    assert len(generated.headers["x-request-id"]) == 32


async def test_metrics_count_requests_by_route_template(client: httpx.AsyncClient) -> None:
    await client.get("/healthz")
    metrics = (await client.get("/metrics")).text
    assert 'http_requests_total{method="GET",route="/healthz",status="200"}' in metrics
    assert "http_request_duration_seconds_bucket" in metrics


def app_with_nested_routes(settings: ServiceSettings) -> Any:
    """Routes behind two router prefixes and behind a mounted sub-application."""
    app = build_app(settings)
    subscriptions = APIRouter(prefix="/subscriptions")

    @subscriptions.get("")
    async def list_subscriptions() -> list[int]:
        return []

    @subscriptions.get("/{subscription_id}")
    async def get_subscription(subscription_id: int) -> int:
        return subscription_id

    webhooks = APIRouter(prefix="/webhooks")
    webhooks.include_router(subscriptions)
    app.include_router(webhooks)
    mounted = FastAPI()

    @mounted.get("/things/{name}")
    async def get_thing(name: str) -> str:
        return name

    app.mount("/portal", mounted)
    return app


async def test_metrics_label_a_route_behind_router_prefixes_by_its_full_template(
    kit_settings: ServiceSettings,
) -> None:
    async with serve_app(app_with_nested_routes(kit_settings)) as http:
        await http.get("/webhooks/subscriptions")
        await http.get("/webhooks/subscriptions/7")
        metrics = (await http.get("/metrics")).text
    assert 'route="/webhooks/subscriptions",status="200"' in metrics
    assert 'route="/webhooks/subscriptions/{subscription_id}",status="200"' in metrics
    assert 'route="/subscriptions' not in metrics


async def test_metrics_label_a_route_of_a_mounted_app_with_the_mount_path(
    kit_settings: ServiceSettings,
) -> None:
    async with serve_app(app_with_nested_routes(kit_settings)) as http:
        await http.get("/portal/things/a")
        metrics = (await http.get("/metrics")).text
    assert 'route="/portal/things/{name}",status="200"' in metrics


async def test_metrics_label_an_unknown_path_as_unmatched(client: httpx.AsyncClient) -> None:
    await client.get("/no/such/path/42")
    metrics = (await client.get("/metrics")).text
    assert 'route="unmatched",status="404"' in metrics
    assert "/no/such/path" not in metrics


async def test_streamed_body_over_the_limit_gets_413(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    key = await make_key(db_engine, AccessLevel.WRITE)

    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"name": "'
        for _ in range(10):
            yield b"x" * 200
        yield b'", "count": 1}'

    response = await client.post(
        "/things", content=chunks(), headers={**bearer(key), "content-type": "application/json"}
    )
    assert response.status_code == 413
    assert response.json()["code"] == "payload_too_large"


async def test_admin_creates_lists_and_revokes_keys_of_its_own_owner(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    admin = await make_key(db_engine, AccessLevel.ADMIN, owner="initech")
    created = await client.post(
        "/api-keys", json={"level": "read", "description": "dashboards"}, headers=bearer(admin)
    )
    assert created.status_code == 201
    body = created.json()
    assert body["owner"] == "initech"
    assert body["key"].startswith("key_")
    assert (await client.get("/api-keys/me", headers=bearer(body["key"]))).status_code == 200

    listed = (await client.get("/api-keys", headers=bearer(admin))).json()
    assert {item["id"] for item in listed} >= {body["id"]}
    assert all("key" not in item for item in listed)

    revoked = await client.delete(f"/api-keys/{body['id']}", headers=bearer(admin))
    assert revoked.status_code == 204
    assert (await client.get("/api-keys/me", headers=bearer(body["key"]))).status_code == 401


async def test_another_owners_key_is_not_found(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    ours = await make_key(db_engine, AccessLevel.ADMIN, owner="owner-one")
    theirs = await make_key(db_engine, AccessLevel.ADMIN, owner="owner-two")
    their_id = (await client.get("/api-keys/me", headers=bearer(theirs))).json()["key_id"]
    response = await client.delete(f"/api-keys/{their_id}", headers=bearer(ours))
    assert response.status_code == 404
    assert (await client.get("/api-keys/me", headers=bearer(theirs))).status_code == 200


async def test_a_key_cannot_revoke_itself(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    admin = await make_key(db_engine, AccessLevel.ADMIN)
    own_id = (await client.get("/api-keys/me", headers=bearer(admin))).json()["key_id"]
    response = await client.delete(f"/api-keys/{own_id}", headers=bearer(admin))
    assert response.status_code == 409


async def test_creating_a_key_with_an_unknown_level_is_refused(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    admin = await make_key(db_engine, AccessLevel.ADMIN)
    response = await client.post("/api-keys", json={"level": "root"}, headers=bearer(admin))
    assert response.status_code == 422


def test_declared_errors_become_one_openapi_response_per_status_with_an_example_each() -> None:
    class TooMany(Conflict):
        code = "too_many"
        default_message = "At the limit"

    responses = error_responses(
        FlatErrorBody, Conflict, TooMany, BadRequest, example_of=flat_error_body
    )
    assert sorted(responses) == [400, 409]
    assert responses[409]["model"] is FlatErrorBody
    assert responses[409]["description"] == "`conflict`: Conflict; `too_many`: At the limit"
    examples = responses[409]["content"]["application/json"]["examples"]
    assert examples["too_many"]["value"] == {"error": "At the limit", "code": "too_many"}


class Thing(BaseModel):
    name: str


def test_the_kits_own_operations_are_documented_with_examples() -> None:
    app = create_service_app(
        ServiceSettings(),
        title="kit",
        description="servicekit's own operations",
        version="0.0.1",
        render_error=render_flat_error,
    )
    app.include_router(api_keys_router(FlatErrorBody, flat_error_body))
    document = app.openapi()
    assert "/healthz" in document["paths"]
    assert undocumented_operations(document) == []
    # Validation failures are documented as the service answers them, not as FastAPI's default.
    invalid = document["paths"]["/api-keys"]["post"]["responses"]["422"]["content"]
    assert invalid["application/json"]["schema"]["$ref"].endswith("/FlatErrorBody")
    example = invalid["application/json"]["examples"]["validation_error"]["value"]
    assert example == {"error": "body.name: Field required", "code": "validation_error"}


def test_an_operation_without_summary_description_or_examples_is_reported() -> None:
    app = FastAPI()

    @app.post("/things")
    async def make_thing(thing: Thing) -> Thing:
        return thing

    # FastAPI makes a summary of the function's name; the rest is missing.
    assert undocumented_operations(app.openapi()) == [
        "POST /things: no description",
        "POST /things: no request example (application/json)",
        "POST /things: no example of its 200 response (application/json)",
        "POST /things: no example of its 422 response (application/json)",
    ]


async def test_the_in_process_client_gives_each_request_its_own_request_state() -> None:
    """As uvicorn does: what one request caches on `request.state` is not the next one's."""
    app = FastAPI()

    @app.get("/seen")
    async def seen(request: Request) -> dict[str, bool]:
        before = hasattr(request.state, "marked")
        request.state.marked = True
        return {"seen": before}

    async with serve_app(app) as http:
        assert (await http.get("/seen")).json() == {"seen": False}
        assert (await http.get("/seen")).json() == {"seen": False}


HSTS = "max-age=63072000; includeSubDomains"


@pytest.mark.parametrize(
    ("path", "status"), [("/healthz", 200), ("/whoami", 401), ("/nowhere", 404), ("/boom", 500)]
)
async def test_every_response_carries_hsts_in_production(
    kit_settings: ServiceSettings, path: str, status: int
) -> None:
    production = kit_settings.model_copy(update={"env": "production"})
    async with serve_app(build_app(production)) as http:
        response = await http.get(path)
    assert response.status_code == status
    assert response.headers["strict-transport-security"] == HSTS


async def test_no_hsts_outside_production(client: httpx.AsyncClient) -> None:
    response = await client.get("/healthz")
    assert "strict-transport-security" not in response.headers


async def test_a_download_is_never_sniffed_nor_stored(client: httpx.AsyncClient) -> None:
    response = await client.get("/download")
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["cache-control"] == "no-store"


async def test_other_responses_keep_their_own_caching(client: httpx.AsyncClient) -> None:
    assert "cache-control" not in (await client.get("/healthz")).headers
