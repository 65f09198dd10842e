"""Where the test suite's Postgres and NATS come from.

In order: `DATABASE_URL`/`NATS_URL` when set; testcontainers when a Docker engine answers;
otherwise the embedded servers from the PyPI wheels.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from servicekit.embedded.nats import EmbeddedNats
from servicekit.embedded.postgres import EmbeddedPostgres


def docker_engine_available() -> bool:
    if os.environ.get("SERVICEKIT_NO_DOCKER"):
        return False
    try:
        import docker

        docker.from_env(timeout=2).ping()
    except Exception:
        return False
    return True


@contextmanager
def postgres_server(workdir: Path) -> Iterator[str]:
    if url := os.environ.get("DATABASE_URL"):
        yield url
        return
    if docker_engine_available():
        from testcontainers.postgres import PostgresContainer

        with PostgresContainer("postgres:17-alpine", driver=None) as container:
            yield container.get_connection_url()
        return
    server = EmbeddedPostgres(workdir / "postgres", durable=False)
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


@contextmanager
def nats_server(workdir: Path) -> Iterator[str]:
    if url := os.environ.get("NATS_URL"):
        yield url
        return
    if docker_engine_available():
        from testcontainers.core.container import DockerContainer
        from testcontainers.core.wait_strategies import LogMessageWaitStrategy

        container = (
            DockerContainer("nats:2-alpine")
            .with_command("-js")
            .with_exposed_ports(4222)
            .waiting_for(LogMessageWaitStrategy("Server is ready"))
        )
        with container:
            host = container.get_container_host_ip()
            yield f"nats://{host}:{container.get_exposed_port(4222)}"
        return
    server = EmbeddedNats(workdir / "nats")
    server.start()
    try:
        yield server.url
    finally:
        server.stop()
