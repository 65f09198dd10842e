"""What webhook-hub's worker prunes besides its delivery log (servicekit.retention), on its
own schema: portal links past `LINK_RETENTION_HOURS` after their expiry, and mail sent or
dead-lettered past `MAIL_RETENTION_DAYS`. The clock is set in 2001, so other tests' rows
(stamped now) are never past a cutoff here."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from servicekit.retention import prune_links, prune_mail
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from webhook_hub.models import PortalLink
from webhook_hub.settings import Settings

NOW = datetime(2001, 1, 1, 12, tzinfo=UTC)


async def test_portal_links_expired_longer_than_the_retention_are_deleted(
    db_engine: AsyncEngine,
) -> None:
    retention = timedelta(hours=Settings().link_retention_hours)
    old, recent = uuid.uuid4().hex, uuid.uuid4().hex
    async with db_engine.begin() as connection:
        for token_hash, expires_at in (
            (old, NOW - retention - timedelta(minutes=1)),
            (recent, NOW - retention + timedelta(minutes=1)),
        ):
            await connection.execute(
                text(
                    "INSERT INTO portal_links (token_hash, owner, level, created_at, expires_at)"
                    " VALUES (:hash, 'retention', 'read', :expires_at, :expires_at)"
                ),
                {"hash": token_hash, "expires_at": expires_at},
            )

    assert await prune_links(db_engine, PortalLink, NOW, retention) == 1
    async with db_engine.begin() as connection:
        kept = await connection.scalars(
            text("SELECT token_hash FROM portal_links WHERE token_hash = ANY(:hashes)"),
            {"hashes": [old, recent]},
        )
        assert list(kept) == [recent]
        await connection.execute(
            text("DELETE FROM portal_links WHERE token_hash = :hash"), {"hash": recent}
        )


async def test_the_hubs_mail_sent_or_dead_lettered_past_the_retention_is_deleted(
    db_engine: AsyncEngine,
) -> None:
    retention = timedelta(days=Settings().mail_retention_days)
    rows: dict[str, dict[str, datetime | None]] = {
        "sent long ago": {"sent_at": NOW - retention - timedelta(hours=1), "dead_at": None},
        "dead long ago": {"sent_at": None, "dead_at": NOW - retention - timedelta(hours=1)},
        "sent lately": {"sent_at": NOW - retention + timedelta(hours=1), "dead_at": None},
        "unsent": {"sent_at": None, "dead_at": None},
    }
    async with db_engine.begin() as connection:
        for subject, times in rows.items():
            await connection.execute(
                text(
                    "INSERT INTO mail_outbox (id, recipient, subject, body, created_at,"
                    " sent_at, dead_at, next_attempt_at)"
                    " VALUES (:id, 'ops@example.com', :subject, '', :created, :sent_at,"
                    " :dead_at, now() + interval '1 year')"
                ),
                {
                    "id": uuid.uuid4(),
                    "subject": subject,
                    "created": NOW - timedelta(days=400),
                    **times,
                },
            )

    await prune_mail(db_engine, NOW, retention)

    async with db_engine.begin() as connection:
        left = await connection.scalars(
            text("SELECT subject FROM mail_outbox WHERE subject = ANY(:subjects)"),
            {"subjects": list(rows)},
        )
        assert sorted(left) == ["sent lately", "unsent"]
        await connection.execute(
            text("DELETE FROM mail_outbox WHERE subject = ANY(:subjects)"),
            {"subjects": list(rows)},
        )
