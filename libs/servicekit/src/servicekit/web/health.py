"""`/healthz` (the process answers), `/readyz` (database and NATS reachable), `/metrics`."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from pydantic import BaseModel, ConfigDict

from servicekit.runtime import ServiceRuntime


class Health(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{"status": "ok"}]})

    status: Literal["ok"]


class Readiness(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"status": "ready", "checks": {"database": True, "nats": True}}]
        }
    )

    status: Literal["ready", "not_ready"]
    checks: dict[str, bool]


def operations_router() -> APIRouter:
    router = APIRouter(tags=["operations"])

    @router.get(
        "/healthz",
        response_model=Health,
        summary="Liveness",
        description="The process answers. For a liveness probe: it checks nothing else.",
    )
    async def healthz() -> Health:
        return Health(status="ok")

    @router.get(
        "/readyz",
        response_model=Readiness,
        responses={503: {"model": Readiness, "description": "A dependency is unreachable"}},
        summary="Readiness",
        description="200 when the database and NATS are reachable, else 503 naming the check "
        "that failed. For a readiness probe and load balancers.",
    )
    async def readyz(request: Request) -> JSONResponse:
        runtime: ServiceRuntime = request.app.state.runtime
        checks = {
            "database": await runtime.database_reachable(),
            "nats": runtime.nats.is_connected,
        }
        ready = all(checks.values())
        body = Readiness(status="ready" if ready else "not_ready", checks=checks)
        return JSONResponse(body.model_dump(), status_code=200 if ready else 503)

    @router.get("/metrics", response_class=Response, include_in_schema=False)
    async def metrics(request: Request) -> Response:
        registry: CollectorRegistry = request.app.state.metrics_registry
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return router
