"""Queries on `event_types`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from servicekit.events.registry import Visibility
from sqlalchemy import bindparam, or_, text
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import insert
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from webhook_hub.models import EventType

_REGISTER = text(
    """
    INSERT INTO event_types
        (name, description, example_payload, schema, source, owner, is_active, updated_at)
    VALUES (:name, :description, :example, :schema, 'api', :owner, true, now())
    ON CONFLICT (name) DO UPDATE
        SET description = EXCLUDED.description, example_payload = EXCLUDED.example_payload,
            schema = EXCLUDED.schema, updated_at = EXCLUDED.updated_at
        WHERE event_types.owner = EXCLUDED.owner
    RETURNING (xmax = 0) AS inserted
    """
).bindparams(
    bindparam("example", type_=postgresql.JSONB), bindparam("schema", type_=postgresql.JSONB)
)


# What submitting an event needs of its type, one row per name asked; the schema as the text
# PostgreSQL writes it, which is also the key of its compiled validator (schema_check).
_SUBMITTABLE = text(
    "SELECT name, owner, is_active, schema::text FROM event_types WHERE name = ANY(:names)"
)


@dataclass(frozen=True, slots=True)
class SubmittableType:
    name: str
    owner: str | None
    is_active: bool
    schema_json: str


class EventTypeRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def list_all(self) -> Sequence[EventType]:
        return (await self.session.exec(select(EventType).order_by(col(EventType.name)))).all()

    async def list_visible(self, owner: str) -> Sequence[EventType]:
        """Platform types and the owner's own; other consumers' types are theirs alone."""
        statement = (
            select(EventType)
            .where(or_(col(EventType.owner).is_(None), col(EventType.owner) == owner))
            .order_by(col(EventType.name))
        )
        return (await self.session.exec(statement)).all()

    async def active_names(self, names: Iterable[str], owner: str | None = None) -> set[str]:
        """Which of the names are active types: platform types, or `owner`'s own."""
        wanted = list(set(names))
        if not wanted:
            return set()
        statement = select(EventType.name).where(
            col(EventType.name).in_(wanted),
            col(EventType.is_active),
            or_(col(EventType.owner).is_(None), col(EventType.owner) == owner),
        )
        return set((await self.session.exec(statement)).all())

    async def get(self, name: str) -> EventType | None:
        return await self.session.get(EventType, name)

    async def submittable(self, names: Iterable[str]) -> dict[str, SubmittableType]:
        """The types of these names that exist, by name (one statement for a whole batch)."""
        connection = await self.session.connection()
        rows = await connection.execute(_SUBMITTABLE, {"names": list(set(names))})
        return {row[0]: SubmittableType(*row) for row in rows}

    async def get_for_update(self, name: str) -> EventType | None:
        statement = select(EventType).where(EventType.name == name).with_for_update()
        return (await self.session.exec(statement)).first()

    async def save(self, event_type: EventType) -> EventType:
        self.session.add(event_type)
        await self.session.flush()
        return event_type

    async def register(
        self,
        owner: str,
        name: str,
        description: str,
        schema: dict[str, Any],
        example: dict[str, Any],
    ) -> tuple[EventType, bool] | None:
        """Insert the owner's type, or refresh it when it is already theirs; the row and
        whether it is new, or None when the name belongs to someone else (or the platform).
        One statement, so two owners racing for a new name cannot both get it."""
        connection = await self.session.connection()
        row = (
            await connection.execute(
                _REGISTER,
                {
                    "name": name,
                    "owner": owner,
                    "description": description,
                    "schema": schema,
                    "example": example,
                },
            )
        ).first()
        if row is None:
            return None
        # The row exists: the statement above just wrote it.
        record = (
            await self.session.exec(
                select(EventType)
                .where(EventType.name == name)
                .execution_options(populate_existing=True)
            )
        ).one()
        return record, bool(row.inserted)

    async def personal_names(self, names: Iterable[str]) -> set[str]:
        """Which of the names are types of personal data."""
        wanted = list(set(names))
        if not wanted:
            return set()
        statement = select(EventType.name).where(
            col(EventType.name).in_(wanted), EventType.visibility == Visibility.PERSONAL
        )
        return set((await self.session.exec(statement)).all())

    async def names_of_source(self, source: str) -> set[str]:
        """The active types a service declared (never a consumer's, whatever `source`)."""
        statement = select(EventType.name).where(
            EventType.source == source, col(EventType.is_active), col(EventType.owner).is_(None)
        )
        return set((await self.session.exec(statement)).all())

    async def upsert(self, documents: Iterable[dict[str, Any]]) -> int:
        """Insert new types, refresh known ones; `is_active` stays as an operator set it. These
        are the services' declarations: a name a consumer registered first becomes a platform
        type (owner cleared), since services' names take precedence."""
        by_name = {doc["name"]: doc for doc in documents if doc.get("name")}
        rows = [
            {
                "name": doc["name"],
                "description": doc.get("description", ""),
                "example_payload": doc.get("example_payload", {}),
                "schema": doc.get("schema", {}),
                "source": doc.get("source", ""),
                "visibility": doc.get("visibility", Visibility.PUBLIC),
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
                "visibility": statement.excluded.visibility,
                "owner": None,
                "updated_at": statement.excluded.updated_at,
            },
        )
        await self.session.exec(statement)
        return len(rows)
