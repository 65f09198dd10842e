"""What feeds GraphQL subscriptions: the events this service already publishes on NATS,
received once per process and fanned out in memory to the subscriptions open on them.

One core NATS subscription per event family (`events.order.>`, `events.content.>`) per
process, whatever the number of sockets. A subscription registers a `Listener` under a key
(an order's id, or the stock feed) and awaits what arrives; nothing polls the database:

- an `order.*` event wakes the listeners of that order, which read the order once each;
- an `order.*` or `content.*` event, while anyone listens to the stock feed, makes the broker
  read the stock of the products it may have changed (the order's lines, the saved product),
  once for all listeners.

Core NATS, not a JetStream consumer: a live feed shows what happens while it is open, and a
subscription starts with the current state (an order's), so nothing needs replaying; events
sent while NATS is away are missed, as any push feed's would be.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import structlog
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from servicekit.events import subject_for
from servicekit.runtime import NatsConnection
from sqlalchemy import text
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

logger = structlog.get_logger(__name__)

SUBJECTS = (subject_for("order.>"), subject_for("content.>"))
# A listener that falls this far behind loses its oldest items (a status wake-up reads the
# order afresh anyway; a stock level is superseded by the next one).
LISTENER_BUFFER = 64

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class OrderEvent:
    order_id: uuid.UUID
    type: str


@dataclass(frozen=True, slots=True)
class ContentEvent:
    product_id: int
    type: str


@dataclass(frozen=True, slots=True)
class StockLevel:
    product_id: int
    stock: int


Event = OrderEvent | ContentEvent


def parse_event(raw: bytes) -> Event | None:
    """A CloudEvent of an order or a saved product, or None for anything else (total: any
    bytes in)."""
    try:
        envelope = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(envelope, dict):
        return None
    kind, data = envelope.get("type"), envelope.get("data")
    if not isinstance(kind, str) or not isinstance(data, dict):
        return None
    key = data.get("id")
    if kind.startswith("order.") and isinstance(key, str):
        try:
            return OrderEvent(uuid.UUID(key), kind)
        except ValueError:
            return None
    if kind.startswith("content.") and type(key) is int and key > 0:
        return ContentEvent(key, kind)
    return None


class Listener(Generic[T]):
    """One subscription's inbox; `end()` makes its iteration stop."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[T | None] = asyncio.Queue(LISTENER_BUFFER)

    def put(self, item: T | None) -> None:
        if self._queue.full():
            self._queue.get_nowait()
        self._queue.put_nowait(item)

    def end(self) -> None:
        self.put(None)

    async def items(self) -> AsyncIterator[T]:
        while (item := await self._queue.get()) is not None:
            yield item


_STOCK_OF_PRODUCTS = text(
    "SELECT id, stock FROM products WHERE id = ANY(:ids) AND NOT deleted ORDER BY id"
)
_STOCK_OF_ORDER = text(
    "SELECT p.id, p.stock FROM products p WHERE NOT p.deleted AND p.id IN"
    " (SELECT product_id FROM order_items WHERE order_id = :order) ORDER BY p.id"
)


class EventBroker:
    def __init__(self, session_factory: async_sessionmaker[AsyncSession]) -> None:
        self._session_factory = session_factory
        self._orders: dict[uuid.UUID, set[Listener[OrderEvent]]] = {}
        self._stock: set[Listener[StockLevel]] = set()
        self._closed = False
        self.following = asyncio.Event()
        # Stock reads run one at a time, in the order the events came.
        self._stock_reads: asyncio.Queue[Event] = asyncio.Queue()

    @contextlib.contextmanager
    def order(self, order_id: uuid.UUID) -> Iterator[Listener[OrderEvent]]:
        """A listener woken by each event of the order, while the block runs."""
        group = self._orders.setdefault(order_id, set())
        listener: Listener[OrderEvent] = self._new_listener()
        group.add(listener)
        try:
            yield listener
        finally:
            group.discard(listener)
            if not group and self._orders.get(order_id) is group:
                del self._orders[order_id]

    @contextlib.contextmanager
    def stock(self) -> Iterator[Listener[StockLevel]]:
        """A listener given the stock of products as events change it."""
        listener: Listener[StockLevel] = self._new_listener()
        self._stock.add(listener)
        try:
            yield listener
        finally:
            self._stock.discard(listener)

    def _new_listener(self) -> Listener[Any]:
        listener: Listener[Any] = Listener()
        if self._closed:
            listener.end()
        return listener

    @property
    def listeners(self) -> int:
        return len(self._stock) + sum(len(group) for group in self._orders.values())

    def deliver(self, event: Event) -> None:
        if isinstance(event, OrderEvent):
            for listener in self._orders.get(event.order_id, ()):
                listener.put(event)
        if self._stock:
            self._stock_reads.put_nowait(event)

    async def _read_stock(self, event: Event) -> list[StockLevel]:
        async with self._session_factory() as session:
            connection = await session.connection()
            if isinstance(event, OrderEvent):
                rows = await connection.execute(_STOCK_OF_ORDER, {"order": event.order_id})
            else:
                rows = await connection.execute(_STOCK_OF_PRODUCTS, {"ids": [event.product_id]})
            return [StockLevel(row.id, row.stock) for row in rows]

    async def _stock_reader(self) -> None:
        while True:
            event = await self._stock_reads.get()
            if not self._stock:
                continue
            try:
                levels = await self._read_stock(event)
            except Exception as exc:  # the database away: this change is not shown
                logger.warning("stock read for subscriptions failed", error=repr(exc))
                continue
            for listener in list(self._stock):
                for level in levels:
                    listener.put(level)

    async def follow(self, nats: NatsConnection) -> None:
        """The process's subscriptions to the events, until cancelled."""

        async def on_message(msg: Msg) -> None:
            event = parse_event(msg.data)
            if event is not None:
                self.deliver(event)

        reader = asyncio.create_task(self._stock_reader(), name="subscription stock reads")
        subscriptions: list[Subscription] = []
        try:
            await nats.wait_ready()
            for subject in SUBJECTS:
                subscriptions.append(await nats.client.subscribe(subject, cb=on_message))
            self.following.set()
            await asyncio.Event().wait()
        finally:
            self.following.clear()
            reader.cancel()
            for subscription in subscriptions:
                with contextlib.suppress(Exception):
                    await subscription.unsubscribe()

    def close(self) -> None:
        """Shutdown: every listener ends; new ones end at once."""
        self._closed = True
        listeners: list[Listener[Any]] = [*self._stock]
        for group in self._orders.values():
            listeners.extend(group)
        for listener in listeners:
            listener.end()


@dataclass(frozen=True)
class ConnectionCaps:
    per_user: int
    per_process: int


class ConnectionCounts:
    """Open subscription connections, per user and in all: a pure rule, no I/O. `open`
    counts a connection in (or says which cap is full); `close` counts it out."""

    def __init__(self, caps: ConnectionCaps) -> None:
        self.caps = caps
        self.total = 0
        self._per_user: dict[str, int] = {}

    def open_process(self) -> bool:
        if self.total >= self.caps.per_process:
            return False
        self.total += 1
        return True

    def close_process(self) -> None:
        self.total = max(self.total - 1, 0)

    def open_user(self, user: str) -> bool:
        held = self._per_user.get(user, 0)
        if held >= self.caps.per_user:
            return False
        self._per_user[user] = held + 1
        return True

    def close_user(self, user: str) -> None:
        left = self._per_user.get(user, 0) - 1
        if left > 0:
            self._per_user[user] = left
        else:
            self._per_user.pop(user, None)

    def of_user(self, user: str) -> int:
        return self._per_user.get(user, 0)
