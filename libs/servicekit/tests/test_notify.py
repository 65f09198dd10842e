"""NotifyListener: LISTEN/NOTIFY wake-ups against a real PostgreSQL."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator

import pytest
from servicekit.db.notify import NotifyListener
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine


def unique_channel() -> str:
    return f"test_{uuid.uuid4().hex[:12]}"


async def notify(engine: AsyncEngine, channel: str) -> None:
    async with engine.begin() as conn:
        await conn.execute(text("SELECT pg_notify(:channel, '')"), {"channel": channel})


async def listener_backends(engine: AsyncEngine, channel: str) -> list[int]:
    async with engine.connect() as conn:
        rows = await conn.execute(
            text("SELECT pid FROM pg_stat_activity WHERE application_name = :name"),
            {"name": f"listen {channel}"},
        )
        return [int(pid) for pid in rows.scalars()]


@pytest.fixture
async def listener(database_url: str) -> AsyncIterator[NotifyListener]:
    async with NotifyListener(
        database_url, unique_channel(), poll_seconds=30.0, reconnect_seconds=0.1
    ) as started:
        await started.listening(timeout=10)
        await started.wait(0)  # the wake-up every (re)connect gives
        yield started


async def test_a_notification_wakes_the_waiter_before_the_poll_interval(
    listener: NotifyListener, db_engine: AsyncEngine
) -> None:
    await notify(db_engine, listener.channel)
    started = time.monotonic()
    assert await listener.wait() is True
    assert time.monotonic() - started < 5


async def test_without_a_notification_the_waiter_sleeps_the_timeout_out(
    listener: NotifyListener,
) -> None:
    assert await listener.wait(0.2) is False


async def test_a_notification_on_another_channel_does_not_wake(
    listener: NotifyListener, db_engine: AsyncEngine
) -> None:
    await notify(db_engine, unique_channel())
    assert await listener.wait(0.3) is False


async def test_a_notification_while_the_waiter_was_busy_is_not_lost(
    listener: NotifyListener, db_engine: AsyncEngine
) -> None:
    await notify(db_engine, listener.channel)
    await asyncio.sleep(0.3)  # busy elsewhere when it arrived
    assert await listener.wait(0) is True


async def test_several_notifications_wake_once(
    listener: NotifyListener, db_engine: AsyncEngine
) -> None:
    for _ in range(3):
        await notify(db_engine, listener.channel)
    await asyncio.sleep(0.3)
    assert await listener.wait(0) is True
    assert await listener.wait(0.2) is False


async def test_wake_wakes_the_waiter_without_the_database(listener: NotifyListener) -> None:
    listener.wake()
    assert await listener.wait(5) is True


async def test_stop_ends_the_wait_without_a_wake_up(listener: NotifyListener) -> None:
    stop = asyncio.Event()
    asyncio.get_running_loop().call_later(0.1, stop.set)
    started = time.monotonic()
    assert await listener.wait(30, stop=stop) is False
    assert time.monotonic() - started < 5


async def test_a_dropped_connection_is_opened_again_and_wakes_the_waiter(
    listener: NotifyListener, db_engine: AsyncEngine
) -> None:
    [before] = await listener_backends(db_engine, listener.channel)
    async with db_engine.begin() as conn:
        await conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": before})
    # Reconnecting wakes the waiter: notifications sent meanwhile were lost.
    assert await listener.wait(10) is True
    await listener.listening(timeout=10)
    [after] = await listener_backends(db_engine, listener.channel)
    assert after != before
    await notify(db_engine, listener.channel)
    assert await listener.wait(10) is True


async def test_a_database_that_is_not_there_yet_is_retried(
    database_url: str, db_engine: AsyncEngine
) -> None:
    channel = unique_channel()
    unreachable = database_url.rsplit("/", 1)[0] + "/no_such_database"
    async with NotifyListener(unreachable, channel, reconnect_seconds=0.05) as listener:
        with pytest.raises(TimeoutError):
            await listener.listening(timeout=0.5)
        assert await listener.wait(0.1) is False
    assert await listener_backends(db_engine, channel) == []


async def test_close_ends_the_listening_connection(
    database_url: str, db_engine: AsyncEngine
) -> None:
    listener = NotifyListener(database_url, unique_channel())
    listener.start()
    await listener.listening(timeout=10)
    assert len(await listener_backends(db_engine, listener.channel)) == 1
    await listener.close()
    await listener.close()  # twice is harmless
    for _ in range(50):
        if not await listener_backends(db_engine, listener.channel):
            break
        await asyncio.sleep(0.1)
    assert await listener_backends(db_engine, listener.channel) == []
