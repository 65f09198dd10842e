"""Wake-ups from PostgreSQL's LISTEN/NOTIFY, with polling as the fall-back.

A loop that works through rows (the outbox relay, the delivery claims, the crawl runs) sleeps
until a commit NOTIFYs its channel or its poll interval passes, whichever comes first. The
notification is only a hint: the loop always reads the table, so a notification lost while the
listening connection was down costs at most one poll interval (and every (re)connect wakes the
loop once, to look at what committed meanwhile).
"""

from __future__ import annotations

import asyncio
import contextlib
from types import TracebackType

import psycopg
import structlog
from psycopg import sql

from servicekit.db.engine import to_libpq_url

logger = structlog.get_logger(__name__)


class NotifyListener:
    """Listens on one channel over a dedicated autocommit connection (a pooled one would hand
    the LISTEN to whichever request takes it next) and wakes whoever `wait`s.

    The connection is kept: lost (a database restart, a terminated backend), it is opened again
    after `reconnect_seconds`, doubling up to `max_reconnect_seconds` while the database stays
    away. Every `keepalive_seconds` without a notification it is probed, so a connection that
    died silently is noticed too.
    """

    def __init__(
        self,
        database_url: str,
        channel: str,
        *,
        poll_seconds: float = 1.0,
        reconnect_seconds: float = 1.0,
        max_reconnect_seconds: float = 30.0,
        keepalive_seconds: float = 30.0,
    ) -> None:
        self.channel = channel
        self.poll_seconds = poll_seconds
        self._url = to_libpq_url(database_url)
        self._reconnect_seconds = reconnect_seconds
        self._max_reconnect_seconds = max_reconnect_seconds
        self._keepalive_seconds = keepalive_seconds
        self._wake = asyncio.Event()
        self._listening = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> NotifyListener:
        self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._listen(), name=f"listen {self.channel}")

    def wake(self) -> None:
        """Wake the waiter now, as a notification would (work this process made possible)."""
        self._wake.set()

    async def wait(
        self, timeout: float | None = None, *, stop: asyncio.Event | None = None
    ) -> bool:
        """Sleep until a notification (or `wake`), `stop` being set, or `timeout` (default: the
        poll interval). True when woken rather than timed out. Wake-ups that came while the
        caller was busy count: they were for work it has not seen yet."""
        if self._wake.is_set():
            self._wake.clear()
            return True
        seconds = self.poll_seconds if timeout is None else timeout
        waiters = {asyncio.ensure_future(self._wake.wait())}
        if stop is not None:
            waiters.add(asyncio.ensure_future(stop.wait()))
        try:
            await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
        woken = self._wake.is_set()
        self._wake.clear()
        return woken

    async def listening(self, timeout: float | None = None) -> None:
        """Until LISTEN is in place (startup, tests); a lost connection makes it wait again."""
        await asyncio.wait_for(self._listening.wait(), timeout)

    async def close(self) -> None:
        """Stop listening and close the connection; safe to call twice."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _listen(self) -> None:
        delay = self._reconnect_seconds
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self._url, autocommit=True, application_name=f"listen {self.channel}"
                ) as conn:
                    await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
                    self._listening.set()
                    self._wake.set()  # what committed while nobody listened
                    delay = self._reconnect_seconds
                    while True:
                        async for _ in conn.notifies(timeout=self._keepalive_seconds):
                            self._wake.set()
                        async with asyncio.timeout(self._keepalive_seconds):
                            await conn.execute("SELECT 1")
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                logger.info(
                    "listener reconnecting", channel=self.channel, error=repr(exc), delay=delay
                )
            finally:
                self._listening.clear()
            await asyncio.sleep(delay)
            delay = min(delay * 2, self._max_reconnect_seconds)
