"""The console script every service has: serve | worker | migrate | api-keys create | ..."""

from __future__ import annotations

import argparse
import asyncio
import gc
import socket
import sys
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import nats
import uvloop
from sqlalchemy.engine import make_url
from sqlalchemy.exc import InterfaceError, OperationalError, ProgrammingError

from servicekit.auth.api_keys import ISSUED_OVER_API, AccessLevel
from servicekit.auth.repository import ApiKeyRepository
from servicekit.db.admin import ensure_database
from servicekit.db.engine import create_engine, create_session_factory
from servicekit.db.migrations import downgrade, upgrade
from servicekit.events.stream import ensure_events_stream
from servicekit.settings import ServiceSettings
from servicekit.web.server import Server, uvicorn_config

if TYPE_CHECKING:  # the worker and admin commands never load the web framework
    from fastapi import FastAPI
    from sqlmodel.ext.asyncio.session import AsyncSession

    from servicekit.db.models import ApiKey

T = TypeVar("T")

Command = Callable[[Any, argparse.Namespace], int]
# The long-running commands keep their tracebacks (an operator's logs want them), and
# `streams` reaches NATS, not the database: the others use the database and end on one line
# when it cannot be used (`database_problem`).
_NOT_DATABASE_COMMANDS = frozenset({"serve", "worker", "streams"})
# Failures that mean the database cannot be used as configured (none of them a bug here).
_UNREACHABLE: tuple[type[BaseException], ...] = (OSError, OperationalError, InterfaceError)


def database_problem(
    error: BaseException, database_url: str, *, name: str, env_prefix: str = ""
) -> str | None:
    """The one line console script `name` prints when `error` means the database cannot be
    used (not reached, missing, refused us, or without its tables), naming where (password
    hidden) and what to do; None for any other error, which keeps its traceback. Total: any
    error and URL in."""
    where = shown_url(database_url)
    variable = f"DATABASE_URL ({env_prefix}DATABASE_URL)" if env_prefix else "DATABASE_URL"
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ProgrammingError) and "does not exist" in str(current):
            return (
                f"{name}: the database at {where} has no tables yet: run `{name} migrate` "
                f"(`make run` does it), or set {variable} to a migrated database"
            )
        if isinstance(current, _UNREACHABLE):
            reason = " ".join(str(getattr(current, "orig", None) or current).split())[:200]
            return (
                f"{name}: cannot use the database at {where} ({reason}): start the stack with "
                f"`make run` first, or set {variable} to a reachable PostgreSQL"
            )
        current = current.__cause__ or current.__context__
    return None


def shown_url(database_url: str) -> str:
    """The URL without its password (it is printed)."""
    try:
        return make_url(database_url).render_as_string(hide_password=True)
    except Exception:
        return "the configured DATABASE_URL"


async def in_transaction(
    settings: ServiceSettings, work: Callable[[AsyncSession], Awaitable[T]]
) -> T:
    """`work` in one transaction on an engine of its own, disposed of after: a command's
    single unit of work (it commits when `work` returns)."""
    engine = create_engine(settings)
    try:
        async with create_session_factory(engine)() as session, session.begin():
            return await work(session)
    finally:
        await engine.dispose()


@dataclass
class ExtraCommand:
    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Command


def keep_out_of_collections() -> None:
    """Modules, schemas and models live as long as the process: frozen, the collector's full
    passes (which requests' garbage triggers) no longer walk them. Measured on
    commerce-content's product page: +15 % GraphQL, +9 % REST requests/s."""
    gc.collect()
    gc.freeze()


# A worker allocates a few dozen objects per event, and the default young-generation threshold
# (700) ran the collector about 600 times in a drain of 30,000 events, promoting short-lived
# objects into passes over the whole heap: 0.26 to 0.58 s of a worker's 5.8 to 7.8 s of CPU
# (webhook-hub's bench). At 20,000 it took 0.03 to 0.09 s. The older generations keep their
# default thresholds, so cycles that outlive the young generation are collected as often
# as before relative to it (raising those too let such garbage grow almost unbounded).
# An API process allocates hundreds per request (the framework's own): at 700 the collector
# ran every request or two; with these thresholds webhook-hub's single-event ingest spent
# 10 to 25 % less API CPU per event (bench/ingest.py, two rounds back to back), so `serve`
# uses them too.
WORKER_GC_THRESHOLDS = (20_000, 10, 10)


def collect_less_often() -> None:
    """The collector's thresholds for a worker or API process (see `WORKER_GC_THRESHOLDS`)."""
    gc.set_threshold(*WORKER_GC_THRESHOLDS)


def reuse_port_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket bound with SO_REUSEPORT: one process is one core of Python, so
    an API that needs more runs several processes on one port, with no process in front."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


class ServiceCLI:
    def __init__(
        self,
        *,
        name: str,
        settings: Callable[[], ServiceSettings],
        app: Callable[[Any], FastAPI],
        worker: Callable[[Any], Any],
        migrations: Path,
        extra: Sequence[ExtraCommand] = (),
        key_levels: Sequence[AccessLevel] = ISSUED_OVER_API,
        after_migrate: Callable[[Any], None] | None = None,
    ) -> None:
        self.name = name
        self._settings = settings
        self._app = app
        self._worker = worker
        self._migrations = migrations
        self._extra = list(extra)
        # `operator` only where the service gives it a meaning (webhook-hub).
        self._key_levels = list(key_levels)
        # What the schema needs besides its migrations once at the head (webhook-hub: the
        # delivery log's first partitions, so the API can write before a worker has run).
        self._after_migrate = after_migrate

    def parser(self) -> argparse.ArgumentParser:
        parser = argparse.ArgumentParser(prog=self.name)
        commands = parser.add_subparsers(dest="command", required=True)
        serve = commands.add_parser("serve", help="run the HTTP API")
        serve.add_argument("--host", help="address to bind (default: settings)")
        serve.add_argument("--port", type=int, help="port to bind (default: settings)")
        serve.add_argument(
            "--reuse-port",
            action="store_true",
            help="bind with SO_REUSEPORT, so several serve processes share the port (the "
            "kernel spreads connections between them)",
        )
        commands.add_parser("worker", help="run the background worker")
        migrate = commands.add_parser("migrate", help="apply database migrations")
        migrate.add_argument("--revision", default="head")
        migrate.add_argument(
            "--downgrade-to",
            metavar="REVISION",
            help="undo the migrations after REVISION (before going back to an older release)",
        )
        migrate.add_argument(
            "--create-database", action="store_true", help="create the database first if missing"
        )
        keys = commands.add_parser("api-keys", help="manage API keys").add_subparsers(
            dest="keys_command", required=True
        )
        create = keys.add_parser("create", help="create a key; prints it as the last line")
        create.add_argument("--owner", required=True)
        create.add_argument(
            "--level", required=True, choices=[level.value for level in self._key_levels]
        )
        create.add_argument("--email", help="where the owner is told about their resources")
        create.add_argument("--description")
        revoke = keys.add_parser(
            "revoke", help="revoke a key by its id; the page sessions and links it opened end"
        )
        revoke.add_argument("key_id", type=uuid.UUID)
        set_level = keys.add_parser(
            "set-level", help="give a key another level; the page sessions it opened end"
        )
        set_level.add_argument("key_id", type=uuid.UUID)
        set_level.add_argument(
            "--level", required=True, choices=[level.value for level in self._key_levels]
        )
        streams = commands.add_parser(
            "streams", help="JetStream set-up, for operators who own it"
        ).add_subparsers(dest="streams_command", required=True)
        streams.add_parser("ensure", help="create the EVENTS stream or update its limits")
        for extra in self._extra:
            sub = commands.add_parser(extra.name, help=extra.help)
            extra.configure(sub)
        return parser

    def main(self, argv: Sequence[str] | None = None) -> int:
        """Run the command; a database command whose database cannot be used prints one line
        (`database_problem`) and answers 2, where it printed a traceback of a few hundred."""
        args = self.parser().parse_args(argv)
        settings = self._settings()
        if args.command in _NOT_DATABASE_COMMANDS:
            return self._run(args, settings)
        try:
            return self._run(args, settings)
        except Exception as exc:
            line = database_problem(
                exc,
                settings.database_url,
                name=self.name,
                env_prefix=str(type(settings).model_config.get("env_prefix", "")),
            )
            if line is None:
                raise
            print(line, file=sys.stderr)
            return 2

    def _run(self, args: argparse.Namespace, settings: ServiceSettings) -> int:
        if args.command == "serve":
            app = self._app(settings)
            keep_out_of_collections()
            collect_less_often()
            config = uvicorn_config(
                app,
                host=args.host or settings.host,
                port=args.port or settings.port,
                max_header_bytes=settings.max_request_header_bytes,
                log_config=None,
                proxy_headers=True,
                timeout_graceful_shutdown=10,
            )
            server = Server(config, app)
            if args.reuse_port:
                server.run(sockets=[reuse_port_socket(config.host, config.port)])
            else:
                server.run()
            return 0
        if args.command == "worker":
            # uvloop (installed with uvicorn[standard]) roughly halves the event loop's cost
            # per socket operation, which is most of a delivery worker's work.
            keep_out_of_collections()
            collect_less_often()
            uvloop.run(self._worker(settings))
            return 0
        if args.command == "migrate":
            if args.create_database and ensure_database(settings.database_url):
                print(f"created database for {self.name}")
            if args.downgrade_to:
                downgrade(self._migrations, settings.database_url, args.downgrade_to)
                print(f"{self.name}: database at revision {args.downgrade_to}")
                return 0
            upgrade(self._migrations, settings.database_url, args.revision)
            if self._after_migrate is not None and args.revision == "head":
                self._after_migrate(settings)
            print(f"{self.name}: database at revision {args.revision}")
            return 0
        if args.command == "api-keys" and args.keys_command == "create":
            return asyncio.run(self._create_key(settings, args))
        if args.command == "api-keys":
            return asyncio.run(self._change_key(settings, args))
        if args.command == "streams":
            return asyncio.run(self._ensure_streams(settings))
        for extra in self._extra:
            if args.command == extra.name:
                return extra.run(settings, args)
        return 2

    async def _ensure_streams(self, settings: ServiceSettings) -> int:
        client = await nats.connect(servers=settings.nats_servers, connect_timeout=5)
        try:
            await ensure_events_stream(client.jetstream(), settings)
        finally:
            await client.close()
        print(f"stream {settings.events_stream} ready ({settings.events_stream_replicas} replicas)")
        return 0

    async def _create_key(self, settings: ServiceSettings, args: argparse.Namespace) -> int:
        async def create(session: AsyncSession) -> tuple[ApiKey, str]:
            return await ApiKeyRepository(session).create(
                prefix=settings.api_key_prefix,
                owner=args.owner,
                level=AccessLevel(args.level),
                email=args.email,
                description=args.description,
            )

        record, plaintext = await in_transaction(settings, create)
        print(f"created {record.level} key {record.id} for owner {record.owner!r}", file=sys.stderr)
        print(plaintext)
        return 0

    async def _change_key(self, settings: ServiceSettings, args: argparse.Namespace) -> int:
        """`api-keys revoke` and `api-keys set-level`: any owner's key (the operator's
        command); the page sessions standing on it end at their next request."""

        async def change(session: AsyncSession) -> ApiKey | None:
            keys = ApiKeyRepository(session)
            record = await keys.get_active(args.key_id)
            if record is None:
                return None
            if args.keys_command == "revoke":
                await keys.revoke(record)
            else:
                await keys.set_level(record, AccessLevel(args.level))
            return record

        record = await in_transaction(settings, change)
        if record is None:
            print(f"no active key {args.key_id}", file=sys.stderr)
            return 1
        done = "revoked" if args.keys_command == "revoke" else f"now {record.level}"
        print(f"key {record.id} of owner {record.owner!r} {done}", file=sys.stderr)
        return 0
