"""`/graphql` over WebSocket: subscriptions with the `graphql-transport-ws` protocol
(graphql-ws's, which GraphiQL, Apollo Client and urql speak), run by strawberry's handler.

- Auth at `connection_init`: its payload's `Authorization: Bearer <token>` (the same JWTs and
  API keys as HTTP). None, or a wrong one, closes the socket with 4403, as the protocol says.
- Caps: connections per user (4429 when full: the user must close one, so clients do not
  retry) and per process (1013 "try again later": clients retry with back-off).
- Heartbeat: the server sends the protocol's `ping` every `GRAPHQL_WS_PING_SECONDS` and
  answers the client's; uvicorn's WebSocket pings find peers that went away.
- Shutdown: every socket is closed with 1001 ("going away") before the server closes its
  connections (servicekit's `before_shutdown`), and again at the lifespan's end.
- Only subscriptions run here: queries and mutations keep HTTP (its caching, idempotency
  keys and one transaction per request).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import structlog
from fastapi import APIRouter, BackgroundTasks, FastAPI, WebSocket
from servicekit.runtime import ServiceRuntime
from servicekit.web.input_guard import (
    DEFAULT_MAX_JSON_DEPTH,
    InvalidNumber,
    json_depth_exceeds,
    load_finite_json,
)

from commerce_content.errors import NotAuthenticated
from commerce_content.graphql_api.adapter import (
    TRANSPORT_WS_PROTOCOL,
    ConnectionRefused,
    MalformedMessage,
    TransportWS,
)
from commerce_content.graphql_api.context import GraphQLContext
from commerce_content.graphql_api.live import ConnectionCaps, ConnectionCounts, EventBroker
from commerce_content.identity.dependencies import Caller, identify
from commerce_content.settings import Settings

logger = structlog.get_logger(__name__)
router = APIRouter()
PATH = "/graphql"

FORBIDDEN = 4403
TOO_MANY_FOR_USER = 4429
SUBPROTOCOL_NOT_ACCEPTABLE = 4406
TRY_AGAIN_LATER = 1013
GOING_AWAY = 1001


def parse_message(text: str) -> dict[str, Any]:
    """A client message of the protocol: JSON text in, a message out, or `ValueError` (not
    JSON) / `MalformedMessage` (JSON, but not a message strawberry can take)."""
    if json_depth_exceeds(text.encode(), DEFAULT_MAX_JSON_DEPTH):
        raise MalformedMessage(f"Messages may nest at most {DEFAULT_MAX_JSON_DEPTH} levels")
    try:
        message = load_finite_json(text, "message")
    except InvalidNumber as exc:
        raise MalformedMessage(exc.message) from exc
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        raise MalformedMessage("A message is a JSON object with a `type`")
    if message["type"] in ("subscribe", "complete") and not isinstance(message.get("id"), str):
        raise MalformedMessage("`subscribe` and `complete` need a string `id`")
    if message["type"] == "subscribe":
        payload = message.get("payload")
        if (
            not isinstance(payload, dict)
            or not isinstance(payload.get("query"), str)
            or not isinstance(payload.get("variables"), dict | None)
            or not isinstance(payload.get("operationName"), str | None)
        ):
            raise MalformedMessage(
                "`subscribe` needs a payload {query, variables?, operationName?}"
            )
    return message


def bearer_token(params: dict[str, object]) -> str | None:
    """The token of `connection_init`'s `Authorization: Bearer <token>` (any case of the
    key, as HTTP headers are)."""
    for key, value in params.items():
        if key.lower() == "authorization" and isinstance(value, str):
            scheme, _, token = value.partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
    return None


class SubscriptionServer:
    """The process's open sockets, their counts, and the broker that feeds them."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.counts = ConnectionCounts(
            ConnectionCaps(
                per_user=settings.graphql_ws_max_connections_per_user,
                per_process=settings.graphql_ws_max_connections,
            )
        )
        self.sockets: set[TransportWS] = set()
        self.broker: EventBroker | None = None
        self.closing = False

    async def close_all(self) -> None:
        """Shutdown: no new socket; each open one closed with 1001, its streams ended."""
        self.closing = True
        if self.broker is not None:
            self.broker.close()
        await asyncio.gather(
            *(socket.close(GOING_AWAY, "going away") for socket in list(self.sockets)),
            return_exceptions=True,
        )


def subscriptions_resource(app: FastAPI, runtime: ServiceRuntime) -> Any:
    """The app resource: the broker follows NATS while the app runs; at the end every socket
    is closed before the database and NATS are."""

    @asynccontextmanager
    async def resource() -> AsyncIterator[None]:
        server: SubscriptionServer = app.state.graphql_subscriptions
        server.broker = EventBroker(runtime.session_factory)
        following = asyncio.create_task(server.broker.follow(runtime.nats), name="gql events")
        try:
            yield
        finally:
            await server.close_all()
            following.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await following

    return resource()


async def _heartbeat(transport: TransportWS, every: float) -> None:
    while True:
        await asyncio.sleep(every)
        if transport.acknowledged:
            await transport.ping()


@router.websocket(PATH)
async def graphql_websocket(websocket: WebSocket) -> None:
    server: SubscriptionServer = websocket.app.state.graphql_subscriptions
    settings = server.settings
    if TRANSPORT_WS_PROTOCOL not in websocket.scope.get("subprotocols", []):
        await websocket.accept()
        await websocket.close(SUBPROTOCOL_NOT_ACCEPTABLE, "Subprotocol not acceptable")
        return
    await websocket.accept(subprotocol=TRANSPORT_WS_PROTOCOL)
    if server.closing or server.broker is None:
        await websocket.close(GOING_AWAY, "going away")
        return
    if not server.counts.open_process():
        await websocket.close(
            TRY_AGAIN_LATER,
            f"Try again later: this server has {server.counts.caps.per_process} subscription"
            " connections open, the most it serves",
        )
        return
    user: list[str] = []
    context = GraphQLContext(
        request=websocket,
        settings=settings,
        session=None,
        background_tasks=BackgroundTasks(),
        caller=None,
        field_limiter=websocket.app.state.graphql_field_limiter,
        session_factory=websocket.app.state.session_factory,
        broker=server.broker,
    )

    async def on_connect(params: dict[str, object]) -> None:
        caller = await _authenticate(websocket, settings, params)
        owner = f"{caller.via}:{caller.subject}"
        if not server.counts.open_user(owner):
            raise ConnectionRefused(
                TOO_MANY_FOR_USER,
                f"Too many connections: this user has {server.counts.caps.per_user} open,"
                " the most allowed; close one",
            )
        user.append(owner)
        context.caller = caller

    transport = TransportWS(
        websocket,
        websocket.app.state.graphql_schema,
        context,
        on_connect=on_connect,
        parse=parse_message,
        init_timeout=timedelta(seconds=settings.graphql_ws_init_timeout_seconds),
        max_operations=settings.graphql_ws_max_subscriptions_per_connection,
    )
    server.sockets.add(transport)
    heartbeat = asyncio.create_task(_heartbeat(transport, settings.graphql_ws_ping_seconds))
    try:
        await transport.run()
    finally:
        heartbeat.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await heartbeat
        server.sockets.discard(transport)
        server.counts.close_process()
        for owner in user:
            server.counts.close_user(owner)


async def _authenticate(
    websocket: WebSocket, settings: Settings, params: dict[str, object]
) -> Caller:
    token = bearer_token(params)
    if token is None:
        raise ConnectionRefused(
            FORBIDDEN, "Forbidden: send Authorization: Bearer <token> in connection_init"
        )
    try:
        async with websocket.app.state.session_factory() as session:
            return await identify(token, settings, session)
    except NotAuthenticated as exc:
        raise ConnectionRefused(FORBIDDEN, f"Forbidden: {exc.message}") from exc
