"""What the worker benchmarks (`changes_revalidation.py`, `runlog_xlsx.py`) share: a local
site in a process of its own and an embedded PostgreSQL migrated to head, both stopped after;
the worker's settings and runtime on that database; a run as the worker's claim leaves it;
and a child process whose figures come back as its last line of JSON."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from scraper_manager.cli import MIGRATIONS
from scraper_manager.models import Run, RunStatus
from scraper_manager.settings import Settings
from servicekit.db.admin import database_url_for, ensure_database
from servicekit.db.engine import create_engine, create_session_factory
from servicekit.db.migrations import upgrade
from servicekit.embedded.network import free_port, wait_for_port
from servicekit.embedded.postgres import EmbeddedPostgres
from servicekit.runtime import NatsConnection, ServiceRuntime

OWNER = "bench"
CHILD_TIMEOUT = 600


def settings_for(url: str, **update: Any) -> Settings:
    return Settings(
        database_url=url,
        log_json=False,
        allowed_networks=["127.0.0.0/8"],
        **update,
    )


def runtime_for(settings: Settings) -> ServiceRuntime:
    """The worker's runtime on its own engine, without NATS."""
    engine = create_engine(settings)
    return ServiceRuntime(
        settings, engine, create_session_factory(engine), NatsConnection(settings, None)
    )


async def new_run(runtime: ServiceRuntime, scraper_id: int) -> int:
    """A run as the worker's claim leaves it: running, started now."""
    async with runtime.session_factory() as session, session.begin():
        run = Run(
            scraper_id=scraper_id,
            owner=OWNER,
            status=RunStatus.RUNNING,
            started_at=datetime.now(UTC),
            heartbeat_at=datetime.now(UTC),
            worker_id="bench",
        )
        session.add(run)
        await session.flush()
        return run.id


@contextmanager
def site_and_database(script: str, prefix: str) -> Iterator[tuple[str, int]]:
    """The database URL and the site's port: `script --site PORT` serves the site (its CPU is
    not the crawler's); the database is scraper_manager_bench on a PostgreSQL in a temporary
    folder."""
    port = free_port()
    site = subprocess.Popen(
        [sys.executable, script, "--site", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    with tempfile.TemporaryDirectory(prefix=prefix) as workdir:
        postgres = EmbeddedPostgres(Path(workdir) / "pg")
        postgres.start()
        try:
            url = database_url_for(postgres.url, "scraper_manager_bench")
            ensure_database(url)
            upgrade(MIGRATIONS, url)
            wait_for_port("127.0.0.1", port, 30)
            yield url, port
        finally:
            postgres.stop()
            site.terminate()
            site.wait(10)


def child_figures(script: str, *args: str) -> dict[str, Any]:
    """`script --child ARGS` in a process of its own: what it printed last, as JSON."""
    result = subprocess.run(
        [sys.executable, script, "--child", *args],
        check=True,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT,
    )
    return dict(json.loads(result.stdout.strip().splitlines()[-1]))
