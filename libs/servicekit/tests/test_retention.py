"""Retention (servicekit.retention): what each pruning deletes at a moment the test chooses,
what it keeps, and that it deletes in bounded batches.

The clock is set in 2001, so the rows other tests write (stamped now) are never past a cutoff
here, and each test deletes what it wrote that retention kept."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta

import pytest
from servicekit.db.engine import create_session_factory
from servicekit.events.outbox import record_event
from servicekit.retention import (
    LINK_LOOP,
    link_retention_loop,
    prune_links,
    prune_mail,
    prune_outbox,
    pruning_loop,
)
from servicekit.runtime import NatsConnection, ServiceRuntime
from servicekit.settings import ServiceSettings
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from structlog.testing import capture_logs

from tests.test_sign_in_links import KitLink, NotALinkTable

NOW = datetime(2001, 1, 1, 12, tzinfo=UTC)
DAY = timedelta(days=1)
HOUR = timedelta(hours=1)


async def outbox_row(
    engine: AsyncEngine, *, published_at: datetime | None, failed_at: datetime | None = None
) -> uuid.UUID:
    row_id = uuid.uuid4()
    async with engine.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO outbox_events (id, type, data, occurred_at, published_at, failed_at)"
                " VALUES (:id, 'retention.tested', '{}', :at, :published_at, :failed_at)"
            ),
            {
                "id": row_id,
                "at": NOW - 30 * DAY,
                "published_at": published_at,
                "failed_at": failed_at,
            },
        )
    return row_id


async def remaining(engine: AsyncEngine, table: str, key: str, ids: list[object]) -> set[object]:
    async with engine.connect() as connection:
        rows = await connection.execute(
            text(f"SELECT {key} FROM {table} WHERE {key} = ANY(:ids)"),  # noqa: S608 (test's own names)
            {"ids": ids},
        )
        return {row[0] for row in rows}


async def forget(engine: AsyncEngine, table: str, key: str, ids: list[object]) -> None:
    async with engine.begin() as connection:
        await connection.execute(
            text(f"DELETE FROM {table} WHERE {key} = ANY(:ids)"),  # noqa: S608 (test's own names)
            {"ids": ids},
        )


@pytest.fixture
async def outbox_ids(db_engine: AsyncEngine) -> AsyncIterator[list[object]]:
    """The outbox rows a test writes, deleted after it (a pending one would reach the relay
    of a later test)."""
    ids: list[object] = []
    yield ids
    await forget(db_engine, "outbox_events", "id", ids)


# -- the outbox ---------------------------------------------------------------------------------


async def test_outbox_rows_published_before_the_retention_are_deleted_and_later_ones_kept(
    db_engine: AsyncEngine, outbox_ids: list[object]
) -> None:
    old = await outbox_row(db_engine, published_at=NOW - 24 * HOUR - timedelta(seconds=1))
    recent = await outbox_row(db_engine, published_at=NOW - 23 * HOUR)
    outbox_ids += [old, recent]

    deleted = await prune_outbox(db_engine, NOW, 24 * HOUR)

    assert deleted == 1
    assert await remaining(db_engine, "outbox_events", "id", outbox_ids) == {recent}


async def test_outbox_rows_set_aside_or_not_yet_published_are_kept_whatever_their_age(
    db_engine: AsyncEngine, outbox_ids: list[object]
) -> None:
    set_aside = await outbox_row(db_engine, published_at=None, failed_at=NOW - 365 * DAY)
    pending = await outbox_row(db_engine, published_at=None)
    outbox_ids += [set_aside, pending]

    await prune_outbox(db_engine, NOW, HOUR)

    assert await remaining(db_engine, "outbox_events", "id", outbox_ids) == {set_aside, pending}


async def test_an_outbox_backlog_larger_than_a_batch_is_deleted_in_several_batches(
    db_engine: AsyncEngine, outbox_ids: list[object]
) -> None:
    outbox_ids += [await outbox_row(db_engine, published_at=NOW - 2 * DAY) for _ in range(7)]
    batches: list[None] = []

    deleted = await prune_outbox(
        db_engine, NOW, DAY, batch=3, progress=lambda: batches.append(None)
    )

    assert deleted == 7
    assert len(batches) == 3  # 3 + 3 + 1: the short batch says the backlog is done
    assert await remaining(db_engine, "outbox_events", "id", outbox_ids) == set()


async def test_a_relayed_event_is_pruned_once_its_retention_has_passed(
    db_engine: AsyncEngine, outbox_ids: list[object]
) -> None:
    async with create_session_factory(db_engine)() as session, session.begin():
        event_id = await record_event(session, "retention.relayed", {"n": 1})
    outbox_ids.append(event_id)
    async with db_engine.begin() as connection:  # as the relay marks it
        await connection.execute(
            text("UPDATE outbox_events SET published_at = :at WHERE id = :id"),
            {"at": NOW - 2 * HOUR, "id": event_id},
        )

    assert await prune_outbox(db_engine, NOW, 3 * HOUR) == 0
    assert await prune_outbox(db_engine, NOW + 2 * HOUR, 3 * HOUR) == 1


# -- the mail outbox ----------------------------------------------------------------------------


async def mail_row(
    engine: AsyncEngine, *, sent_at: datetime | None = None, dead_at: datetime | None = None
) -> uuid.UUID:
    row_id = uuid.uuid4()
    async with engine.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO mail_outbox (id, recipient, subject, body, created_at, sent_at,"
                " dead_at, next_attempt_at)"
                " VALUES (:id, 'someone@example.com', 'hello', 'body', :created, :sent_at,"
                " :dead_at, :created)"
            ),
            {"id": row_id, "created": NOW - 400 * DAY, "sent_at": sent_at, "dead_at": dead_at},
        )
    return row_id


@pytest.fixture
async def mail_ids(db_engine: AsyncEngine) -> AsyncIterator[list[object]]:
    ids: list[object] = []
    yield ids
    await forget(db_engine, "mail_outbox", "id", ids)


async def test_mail_sent_or_dead_lettered_before_the_retention_is_deleted_and_unsent_mail_kept(
    db_engine: AsyncEngine, mail_ids: list[object]
) -> None:
    sent_long_ago = await mail_row(db_engine, sent_at=NOW - 31 * DAY)
    dead_long_ago = await mail_row(db_engine, dead_at=NOW - 31 * DAY)
    sent_lately = await mail_row(db_engine, sent_at=NOW - 29 * DAY)
    dead_lately = await mail_row(db_engine, dead_at=NOW - 29 * DAY)
    unsent = await mail_row(db_engine)  # written 400 days ago, still being retried
    mail_ids += [sent_long_ago, dead_long_ago, sent_lately, dead_lately, unsent]

    deleted = await prune_mail(db_engine, NOW, 30 * DAY)

    assert deleted == 2
    assert await remaining(db_engine, "mail_outbox", "id", mail_ids) == {
        sent_lately,
        dead_lately,
        unsent,
    }


async def test_finished_mail_larger_than_a_batch_is_deleted_in_several_batches(
    db_engine: AsyncEngine, mail_ids: list[object]
) -> None:
    mail_ids += [await mail_row(db_engine, sent_at=NOW - 40 * DAY) for _ in range(5)]

    assert await prune_mail(db_engine, NOW, 30 * DAY, batch=2) == 5
    assert await remaining(db_engine, "mail_outbox", "id", mail_ids) == set()


# -- sign-in links ------------------------------------------------------------------------------


async def link_row(
    engine: AsyncEngine, *, expires_at: datetime, used_at: datetime | None = None
) -> str:
    token_hash = uuid.uuid4().hex
    async with engine.begin() as connection:
        await connection.run_sync(KitLink.__table__.create, checkfirst=True)  # type: ignore[attr-defined]
        await connection.execute(
            text(
                "INSERT INTO kit_sign_in_links (token_hash, owner, level, expires_at, used_at)"
                " VALUES (:hash, 'owner-retention', 'read', :expires_at, :used_at)"
            ),
            {"hash": token_hash, "expires_at": expires_at, "used_at": used_at},
        )
    return token_hash


async def test_links_expired_longer_than_the_retention_are_deleted_used_or_not(
    db_engine: AsyncEngine,
) -> None:
    retention = 7 * DAY
    unused_old = await link_row(db_engine, expires_at=NOW - retention - HOUR)
    used_old = await link_row(
        db_engine, expires_at=NOW - retention - HOUR, used_at=NOW - retention - 2 * HOUR
    )
    expired_lately = await link_row(db_engine, expires_at=NOW - retention + HOUR)
    used_lately = await link_row(db_engine, expires_at=NOW + HOUR, used_at=NOW - HOUR)
    still_open = await link_row(db_engine, expires_at=NOW + HOUR)
    hashes: list[object] = [unused_old, used_old, expired_lately, used_lately, still_open]

    deleted = await prune_links(db_engine, KitLink, NOW, retention, batch=1)

    assert deleted == 2
    assert await remaining(db_engine, "kit_sign_in_links", "token_hash", hashes) == {
        expired_lately,
        used_lately,
        still_open,
    }
    await forget(db_engine, "kit_sign_in_links", "token_hash", hashes)


def test_a_link_retention_loop_over_a_table_without_the_link_columns_is_refused_at_once(
    kit_settings: ServiceSettings,
) -> None:
    with pytest.raises(TypeError, match="expires_at"):
        link_retention_loop(NotALinkTable, kit_settings, 24.0)


# -- the loop -----------------------------------------------------------------------------------


async def test_a_failed_round_is_logged_and_the_loop_goes_on_reporting_its_progress(
    db_engine: AsyncEngine, kit_settings: ServiceSettings
) -> None:
    runtime = ServiceRuntime(
        kit_settings,
        db_engine,
        create_session_factory(db_engine),
        NatsConnection(kit_settings, None),  # never started: pruning needs no NATS
    )
    stop = asyncio.Event()
    moments: list[datetime] = []

    async def prune(engine: AsyncEngine, now: datetime, progress: Callable[[], None]) -> int:
        moments.append(now)
        if len(moments) == 1:
            raise RuntimeError("the first round fails")
        stop.set()
        return 0

    loop = pruning_loop(LINK_LOOP, prune, 0.01, clock=lambda: NOW)
    with capture_logs() as lines:
        await asyncio.wait_for(loop(runtime, stop), 10)

    assert moments == [NOW, NOW]
    assert runtime.progress.loops == [LINK_LOOP]
    failures = [line for line in lines if line["log_level"] == "warning"]
    assert [(line["loop"], "first round fails" in line["error"]) for line in failures] == [
        (LINK_LOOP, True)
    ]
