"""Queries on `event_types`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.dialects.postgresql import insert
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from webhook_hub.models import EventType


class EventTypeRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def list_all(self) -> Sequence[EventType]:
        return (await self.session.exec(select(EventType).order_by(col(EventType.name)))).all()

    async def active_names(self, names: Iterable[str]) -> set[str]:
        wanted = list(set(names))
        if not wanted:
            return set()
        statement = select(EventType.name).where(
            col(EventType.name).in_(wanted), col(EventType.is_active)
        )
        return set((await self.session.exec(statement)).all())

    async def names_of_source(self, source: str) -> set[str]:
        statement = select(EventType.name).where(
            EventType.source == source, col(EventType.is_active)
        )
        return set((await self.session.exec(statement)).all())

    async def upsert(self, documents: Iterable[dict[str, Any]]) -> int:
        """Insert new types, refresh known ones; `is_active` stays as an operator set it."""
        by_name = {doc["name"]: doc for doc in documents if doc.get("name")}
        rows = [
            {
                "name": doc["name"],
                "description": doc.get("description", ""),
                "example_payload": doc.get("example_payload", {}),
                "schema": doc.get("schema", {}),
                "source": doc.get("source", ""),
                "is_active": True,
                "updated_at": datetime.now(UTC),
            }
            for doc in by_name.values()
        ]
        if not rows:
            return 0
        statement = insert(EventType.__table__).values(rows)  # type: ignore[attr-defined]
        statement = statement.on_conflict_do_update(
            index_elements=["name"],
            set_={
                "description": statement.excluded.description,
                "example_payload": statement.excluded.example_payload,
                "schema": statement.excluded.schema,
                "source": statement.excluded.source,
                "updated_at": statement.excluded.updated_at,
            },
        )
        await self.session.exec(statement)
        return len(rows)
