"""The NATS connection of a process: who owns the EVENTS stream."""

from __future__ import annotations

import asyncio

import pytest
from nats.js import JetStreamContext
from servicekit.runtime import NatsConnection
from servicekit.settings import ServiceSettings


async def test_a_service_that_does_not_own_the_stream_waits_for_it(
    kit_settings: ServiceSettings,
) -> None:
    settings = kit_settings.model_copy(
        update={"manage_events_stream": False, "events_stream": "CREATED_BY_A_JOB"}
    )
    connection = NatsConnection(settings, None)
    connection.start()
    try:
        with pytest.raises(TimeoutError):
            await connection.wait_ready(timeout=1.5)
        assert not connection.is_connected
    finally:
        await connection.close()


async def test_a_service_that_does_not_own_the_stream_starts_once_it_exists(
    kit_settings: ServiceSettings, js: JetStreamContext
) -> None:
    settings = kit_settings.model_copy(update={"manage_events_stream": False})
    connection = NatsConnection(settings, None)
    connection.start()
    try:
        await asyncio.wait_for(connection.wait_ready(), 10)
        assert connection.is_connected
    finally:
        await connection.close()
