"""Pid files for the processes a launcher starts in their own sessions.

A launcher killed with SIGKILL cannot stop its servers; they keep their ports and data
directories, and the next start would fail on them. Each pid file records the pid, the
process's command line and its start time, and a process is signalled only when all three
still match: a pid recycled by an unrelated program (or by a later run of the same one) is
left alone and its stale file removed.
"""

from __future__ import annotations

import contextlib
import json
import signal
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil


@dataclass(frozen=True)
class PidRecord:
    pid: int
    cmdline: list[str]
    create_time: float
    port: int | None = None
    # How the process wants to be stopped (PostgreSQL: SIGINT, its fast shutdown).
    stop_signal: int = signal.SIGTERM


def write_pid_file(
    path: Path, pid: int, *, port: int | None = None, stop_signal: int = signal.SIGTERM
) -> PidRecord:
    """Record a started process (after `Popen` returns, so it has exec'd its program)."""
    process = psutil.Process(pid)
    record = PidRecord(pid, _cmdline(process), process.create_time(), port, int(stop_signal))
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".tmp")
    partial.write_text(json.dumps(asdict(record)))
    partial.replace(path)
    return record


def _cmdline(process: psutil.Process) -> list[str]:
    """Right after exec, Linux shows an empty command line for a moment: wait it out."""
    deadline = time.monotonic() + 5
    while not (cmdline := process.cmdline()) and time.monotonic() < deadline:
        time.sleep(0.01)
    return cmdline


def read_pid_file(path: Path) -> PidRecord | None:
    try:
        raw = json.loads(path.read_text())
        return PidRecord(
            int(raw["pid"]),
            [str(part) for part in raw["cmdline"]],
            float(raw["create_time"]),
            None if raw.get("port") is None else int(raw["port"]),
            int(raw.get("stop_signal", signal.SIGTERM)),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def recorded_process(record: PidRecord) -> psutil.Process | None:
    """The live process the record describes, or None when it is gone or the pid was reused."""
    try:
        process = psutil.Process(record.pid)
        same = (
            abs(process.create_time() - record.create_time) < 0.01
            and process.cmdline() == record.cmdline
        )
        running = process.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None
    return process if same and running else None


def stop_pid_file(path: Path, timeout: float = 10.0) -> PidRecord | None:
    """Stop the process a pid file names, if it is still that process, and remove the file.
    Returns the record of a process that was stopped (None: nothing of ours was running)."""
    record = read_pid_file(path)
    process = recorded_process(record) if record is not None else None
    if record is not None and process is not None:
        _terminate(process, record.stop_signal, timeout)
    path.unlink(missing_ok=True)
    return record if process is not None else None


def _terminate(process: psutil.Process, stop_signal: int, timeout: float) -> None:
    try:
        process.send_signal(stop_signal)
        process.wait(timeout)
    except psutil.NoSuchProcess:
        return
    except psutil.TimeoutExpired:
        # A process that ignores its stop signal for this long is stuck.
        process.kill()
        with contextlib.suppress(psutil.NoSuchProcess, psutil.TimeoutExpired):
            process.wait(5.0)
