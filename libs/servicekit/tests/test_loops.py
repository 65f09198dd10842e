"""What batch loops share: an item's failure told from an outage, and stalled loops found."""

from __future__ import annotations

import nats.errors
import nats.js.errors
import psycopg
import sqlalchemy.exc
from servicekit.loops import Beat, LoopProgress, describe, is_outage, readiness, stalled_loops


def test_a_lost_connection_or_a_timeout_is_an_outage() -> None:
    assert is_outage(TimeoutError())
    assert is_outage(ConnectionRefusedError())
    assert is_outage(nats.errors.ConnectionClosedError())
    assert is_outage(nats.errors.NoServersError())
    assert is_outage(
        sqlalchemy.exc.OperationalError("SELECT 1", {}, psycopg.OperationalError("gone"))
    )


def test_jetstream_answering_unavailable_is_an_outage_and_a_refused_message_is_not() -> None:
    assert is_outage(nats.js.errors.ServiceUnavailableError(code=503))
    assert not is_outage(nats.js.errors.BadRequestError(code=400, description="too big"))


def test_a_value_the_database_refuses_is_the_items_failure() -> None:
    refused = sqlalchemy.exc.DataError("INSERT", {}, psycopg.errors.NumericValueOutOfRange())
    assert not is_outage(refused)
    assert not is_outage(sqlalchemy.exc.IntegrityError("INSERT", {}, Exception("duplicate")))


def test_a_statement_wrong_for_every_row_is_an_outage_not_the_items_failure() -> None:
    # A migration not applied yet: setting each item aside for it would set them all aside.
    missing = psycopg.errors.UndefinedColumn()
    assert is_outage(sqlalchemy.exc.ProgrammingError("INSERT", {}, missing))
    assert is_outage(psycopg.errors.InsufficientPrivilege())


def test_a_triggers_refusal_of_one_row_is_the_items_failure() -> None:
    assert not is_outage(psycopg.errors.RaiseException())


def test_an_item_that_cannot_be_built_or_sent_is_the_items_failure() -> None:
    assert not is_outage(ValueError("not a cron expression"))
    assert not is_outage(nats.errors.MaxPayloadError())
    assert not is_outage(TypeError("not serialisable"))


def test_an_outage_behind_another_exception_is_still_an_outage() -> None:
    wrapped = RuntimeError("batch failed")
    wrapped.__cause__ = ConnectionResetError("reset by peer")
    assert is_outage(wrapped)


def test_an_error_whose_repr_raises_is_described_by_its_type() -> None:
    class Unprintable(Exception):
        def __repr__(self) -> str:
            raise RuntimeError("no")

    assert describe(Unprintable()) == "Unprintable"
    assert len(describe(ValueError("x" * 5000))) == 1000


def test_a_loop_is_stalled_once_its_last_beat_is_older_than_the_limit_plus_its_wait() -> None:
    beats = {"relay": Beat(at=100.0, idle=1.0), "scheduler": Beat(at=100.0, idle=60.0)}
    assert stalled_loops(beats, now=400.0, limit=300.0) == []
    assert stalled_loops(beats, now=401.5, limit=300.0) == ["relay"]
    assert stalled_loops(beats, now=461.5, limit=300.0) == ["relay", "scheduler"]


def test_a_beat_after_a_stall_makes_the_loop_current_again() -> None:
    now = [0.0]
    progress = LoopProgress(clock=lambda: now[0])
    progress.beat("dispatch", idle=1.0)
    now[0] = 500.0
    assert progress.stalled(300.0) == ["dispatch"]
    progress.beat("dispatch", idle=1.0)
    assert progress.stalled(300.0) == []


def test_a_loop_that_ended_is_no_longer_watched() -> None:
    now = [0.0]
    progress = LoopProgress(clock=lambda: now[0])
    progress.beat("mail-outbox")
    progress.forget("mail-outbox")
    now[0] = 1000.0
    assert progress.stalled(300.0) == []
    assert progress.loops == []


def test_readiness_is_503_naming_the_stalled_loops() -> None:
    status, body = readiness(True, True, ["dispatch"])
    assert status == 503
    assert body == {
        "status": "not_ready",
        "checks": {"database": True, "nats": True, "loops": False},
        "stalled_loops": ["dispatch"],
    }


def test_readiness_is_200_when_everything_is_reachable_and_every_loop_progresses() -> None:
    assert readiness(True, True, []) == (
        200,
        {"status": "ready", "checks": {"database": True, "nats": True, "loops": True}},
    )


def test_readiness_is_503_when_the_database_is_away_whatever_the_loops() -> None:
    status, body = readiness(False, True, [])
    assert status == 503
    assert "stalled_loops" not in body
