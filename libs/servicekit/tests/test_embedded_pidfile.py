"""Pid files of servers a launcher left running: what is still ours is stopped, a pid that now
belongs to something else never is."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import asdict, replace
from pathlib import Path

import psutil
import pytest
from servicekit.embedded.pidfile import read_pid_file, stop_pid_file, write_pid_file
from servicekit.embedded.postgres import EmbeddedPostgres


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(["sleep", "60"], start_new_session=True)
    yield process
    process.kill()
    process.wait()


def test_a_recorded_process_still_running_is_stopped_and_its_file_removed(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    pid_file = tmp_path / "nats.json"
    write_pid_file(pid_file, sleeper.pid, port=4222)

    stopped = stop_pid_file(pid_file, timeout=5)

    assert stopped is not None
    assert stopped.port == 4222
    assert sleeper.wait(5) is not None
    assert not pid_file.exists()


def test_a_pid_reused_by_a_process_started_later_is_left_alone(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    pid_file = tmp_path / "nats.json"
    record = write_pid_file(pid_file, sleeper.pid)
    pid_file.write_text(json.dumps(asdict(replace(record, create_time=record.create_time - 60))))

    assert stop_pid_file(pid_file, timeout=1) is None
    assert sleeper.poll() is None
    assert not pid_file.exists()  # stale: nothing of ours has that pid any more


def test_a_pid_now_running_another_command_is_left_alone(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    pid_file = tmp_path / "postgres.json"
    record = write_pid_file(pid_file, sleeper.pid)
    pid_file.write_text(json.dumps(asdict(replace(record, cmdline=["postgres", "-D", "/x"]))))

    assert stop_pid_file(pid_file, timeout=1) is None
    assert sleeper.poll() is None


def test_a_pid_file_that_is_not_one_reads_as_nothing(tmp_path: Path) -> None:
    pid_file = tmp_path / "garbage.json"
    pid_file.write_text("12345")

    assert read_pid_file(pid_file) is None
    assert stop_pid_file(pid_file) is None


def test_a_postmaster_pid_naming_another_program_does_not_get_it_signalled(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    data_dir = tmp_path / "pg"
    data_dir.mkdir()
    (data_dir / "postmaster.pid").write_text(f"{sleeper.pid}\n{data_dir}\n")

    EmbeddedPostgres(data_dir, port=1)._stop_leftover()

    assert sleeper.poll() is None
    assert psutil.Process(sleeper.pid).is_running()
