"""The delivery log's live view under load, over real HTTP (uvicorn on 127.0.0.1, and the real
`serve` process for shutdown): capped per session (429 past it, the slot back when the browser
goes), no database connection per stream, every open stream told of a delivery the worker
records, another owner's endpoint a 404, and open streams ended cleanly by SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from nats.js import JetStreamContext
from servicekit.embedded.network import free_port
from servicekit.testing import HttpReceiver
from servicekit.testing.live import live_server, until_open_streams
from servicekit.testing.sse import open_feed
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from webhook_hub.app import create_app
from webhook_hub.deliveries.live import LIVE_SUBJECT
from webhook_hub.settings import Settings

from tests.factories import (
    Consumer,
    make_consumer,
    publish_event,
    set_deliveries,
    signed_in,
    subscribe,
)

TIMEOUT = httpx.Timeout(30.0)


def live_url(subscription_id: str) -> str:
    return f"/portal/endpoints/{subscription_id}/deliveries/live"


def tagged(settings: Settings, **caps: int) -> Settings:
    """`settings` with these caps and an application name, so the app's own database backends
    can be counted in pg_stat_activity."""
    name = f"live-{uuid.uuid4().hex[:8]}"
    separator = "&" if "?" in settings.database_url else "?"
    return settings.model_copy(
        update={
            "database_url": f"{settings.database_url}{separator}application_name={name}",
            **caps,
        }
    )


async def endpoint_of(client: httpx.AsyncClient, consumer: Consumer, receiver: HttpReceiver) -> str:
    return str((await subscribe(client, consumer.headers, receiver.url))["id"])


async def test_past_the_session_cap_a_live_view_is_429_and_a_closed_one_frees_its_slot(
    service_settings: Settings, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer = await make_consumer(db_engine, "write")
    settings = tagged(service_settings, live_streams_per_session=2)
    async with live_server(create_app(settings)) as server, server.client() as client:
        endpoint = await endpoint_of(client, consumer, http_receiver)
        await signed_in(client, consumer)
        async with contextlib.AsyncExitStack() as first:
            kept = [await open_feed(first, client, live_url(endpoint))]
            async with contextlib.AsyncExitStack() as second:
                kept.append(await open_feed(second, client, live_url(endpoint)))
                refused = await client.get(live_url(endpoint))
                assert refused.status_code == 429
                assert "2 live views open" in refused.text
            # The second browser went: its slot is free again.
            await until_open_streams(server.hub, 1)
            async with contextlib.AsyncExitStack() as third:
                kept.append(await open_feed(third, client, live_url(endpoint)))
                assert server.hub.open_streams == 2
        await until_open_streams(server.hub, 0)


async def test_fifty_open_streams_hold_no_database_connection_and_share_one_read(
    service_settings: Settings, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer = await make_consumer(db_engine, "write")
    settings = tagged(service_settings, live_streams_per_session=100, live_streams_per_owner=100)
    name = settings.database_url.rsplit("application_name=", 1)[1]

    async def backends() -> int:
        async with db_engine.connect() as connection:
            count = await connection.scalar(
                text("SELECT count(*) FROM pg_stat_activity WHERE application_name = :name"),
                {"name": name},
            )
        return int(count or 0)

    async with live_server(create_app(settings)) as server, server.client() as client:
        endpoint = await endpoint_of(client, consumer, http_receiver)
        await signed_in(client, consumer)
        async with contextlib.AsyncExitStack() as streams:
            feeds = [await open_feed(streams, client, live_url(endpoint))]
            one_stream = await backends()
            feeds += [await open_feed(streams, client, live_url(endpoint)) for _ in range(49)]
            assert server.hub.open_streams == 50
            assert await backends() <= one_stream + settings.live_stream_reads
            # A change of the endpoint reaches the 50 streams through one query.
            await set_deliveries(db_engine, endpoint, [("failed", timedelta(0))])
            before = server.checkouts
            await server.announce(LIVE_SUBJECT, endpoint)
            await asyncio.gather(*(feed.until("badge-bad") for feed in feeds))
            assert server.checkouts - before == 1


async def test_a_delivery_the_worker_records_reaches_every_open_stream_of_its_endpoint(
    service_settings: Settings,
    db_engine: AsyncEngine,
    http_receiver: HttpReceiver,
    worker: Settings,
    js: JetStreamContext,
) -> None:
    consumer = await make_consumer(db_engine, "write")
    async with (
        live_server(create_app(tagged(service_settings))) as server,
        server.client() as one,
        server.client() as other,
    ):
        endpoint = await endpoint_of(one, consumer, http_receiver)
        await signed_in(one, consumer)
        await signed_in(other, consumer)  # a second session of the same owner
        async with contextlib.AsyncExitStack() as streams:
            feeds = [await open_feed(streams, c, live_url(endpoint)) for c in (one, other) * 3]
            marker = f"order-{uuid.uuid4().hex[:8]}"
            await publish_event(js, "order.paid", {"id": marker}, tenant=consumer.owner)
            rows = await asyncio.gather(*(feed.until("order.paid") for feed in feeds))
            assert all("succeeded" in html for html in rows)


async def test_signing_out_ends_the_open_live_views_of_the_session(
    service_settings: Settings, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer = await make_consumer(db_engine, "write")
    settings = tagged(service_settings, live_session_recheck_seconds=0)
    async with live_server(create_app(settings)) as server, server.client() as client:
        endpoint = await endpoint_of(client, consumer, http_receiver)
        token = await signed_in(client, consumer)
        async with contextlib.AsyncExitStack() as streams:
            feed = await open_feed(streams, client, live_url(endpoint))
            signed_out = await client.post("/portal/logout", data={"csrf_token": token})
            assert signed_out.status_code == 303
            await set_deliveries(db_engine, endpoint, [("failed", timedelta(0))])
            await server.announce(LIVE_SUBJECT, endpoint)
            # The change is not shown: the stream ends, its slot given back.
            with pytest.raises(EOFError):
                await asyncio.wait_for(feed.next_event(), 30)
        await until_open_streams(server.hub, 0)


async def test_another_owners_endpoint_has_no_live_view(
    service_settings: Settings, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    owner, stranger = await make_consumer(db_engine, "write"), await make_consumer(db_engine)
    async with (
        live_server(create_app(tagged(service_settings))) as server,
        server.client() as client,
    ):
        endpoint = await endpoint_of(client, owner, http_receiver)
        await signed_in(client, stranger)
        response = await client.get(live_url(endpoint))
        assert response.status_code == 404
        assert server.hub.open_streams == 0


def start_serve(settings: Settings, port: int) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "WEBHOOK_HUB_DATABASE_URL": settings.database_url,
        "WEBHOOK_HUB_NATS_URL": settings.nats_url,
        "WEBHOOK_HUB_PORT": str(port),
        "WEBHOOK_HUB_LOG_LEVEL": "WARNING",
    }
    executable = str(Path(sys.executable).parent / "webhook-hub")
    return subprocess.Popen([executable, "serve"], env=env, stdout=subprocess.DEVNULL)


@pytest.fixture
async def serve_process(
    service_settings: Settings,
) -> AsyncIterator[tuple[str, subprocess.Popen[bytes]]]:
    port = free_port()
    process = start_serve(service_settings, port)
    url = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient() as probe:
            for _ in range(300):
                with contextlib.suppress(httpx.HTTPError):
                    if (await probe.get(f"{url}/healthz", timeout=1)).status_code == 200:
                        break
                assert process.poll() is None, "webhook-hub serve exited"
                await asyncio.sleep(0.1)
        yield url, process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(30)


async def test_sigterm_ends_the_open_streams_and_the_process_exits(
    serve_process: tuple[str, subprocess.Popen[bytes]],
    db_engine: AsyncEngine,
    http_receiver: HttpReceiver,
) -> None:
    url, process = serve_process
    consumer = await make_consumer(db_engine, "write")
    async with httpx.AsyncClient(base_url=url, timeout=TIMEOUT) as client:
        endpoint = await endpoint_of(client, consumer, http_receiver)
        await signed_in(client, consumer)
        async with contextlib.AsyncExitStack() as streams:
            feeds = [await open_feed(streams, client, live_url(endpoint)) for _ in range(3)]
            process.send_signal(signal.SIGTERM)
            # Each ends as a complete response (its last chunk sent): no cut connection.
            for feed in feeds:
                with pytest.raises(EOFError):
                    await asyncio.wait_for(feed.next_event(), 30)
    # uvicorn re-raises the signal it caught once its shutdown is done.
    assert await asyncio.to_thread(process.wait, 30) == -signal.SIGTERM
