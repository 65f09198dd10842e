"""`make run`: the whole platform on embedded PostgreSQL and NATS, on a machine with only Python.

Starts PostgreSQL and NATS (JetStream) from their PyPI wheels unless `DATABASE_URL`/`NATS_URL`
(or a service's prefixed variable) point elsewhere, an SMTP sink filing mail under
`<data>/mail/`, then per service: its database, its migrations, a dev admin key, its API and
its worker. Ctrl-C (or SIGTERM, SIGHUP) stops every process it started, services first, then
NATS, then PostgreSQL (fast shutdown); further signals during that shutdown are noted and do
not interrupt it. Every process runs in a session of its own, so the terminal's Ctrl-C reaches
only this launcher, which stops them in order. Each is recorded in a pid file under
`<data>/pids/`; a launcher that was SIGKILLed leaves them running, and the next start stops
them (when the pid still belongs to the recorded command) before it starts anew.
Data lives under `--data-dir` (default `.data/`) and survives restarts.

`--nats-cluster` starts NATS as a 3-node JetStream cluster on loopback instead (as the
Kubernetes manifests run it): `NATS_URL` lists the three nodes and the `EVENTS` stream has 3
replicas unless `<PREFIX>EVENTS_STREAM_REPLICAS` says otherwise. `--services` starts only the
services named.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from servicekit.db.admin import database_url_for
from servicekit.embedded.nats import EmbeddedNats, EmbeddedNatsCluster
from servicekit.embedded.network import free_port, port_open
from servicekit.embedded.pidfile import (
    read_pid_file,
    recorded_process,
    stop_pid_file,
    write_pid_file,
)
from servicekit.embedded.postgres import EmbeddedPostgres
from servicekit.embedded.smtp import SmtpServer


@dataclass
class Child:
    """A process the stack started, with what it takes to start it again."""

    label: str
    args: list[str]
    env: dict[str, str]
    process: subprocess.Popen[bytes]
    restarts: int = 0


@dataclass(frozen=True)
class Service:
    name: str
    prefix: str
    database: str
    port: int
    seeds: bool = False  # has a `seed` command loading demo data


SERVICES = (
    Service("webhook-hub", "WEBHOOK_HUB_", "webhook_hub", 8001),
    Service("scraper-manager", "SCRAPER_MANAGER_", "scraper_manager", 8002),
    Service("commerce-content", "COMMERCE_CONTENT_", "commerce_content", 8003, seeds=True),
)
BIN = Path(sys.executable).parent
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
ROLES = ("admin", "manager", "user", "guest")
DEV_TOKEN_TTL_SECONDS = 7 * 24 * 3600  # outlives a working week of `make run`


def log(message: str) -> None:
    print(f"[stack] {message}", flush=True)


class Shutdown(BaseException):
    """The first stop signal: unwinds whatever the launcher is doing, then `stop()` runs.
    A BaseException, like KeyboardInterrupt, so no `except Exception` swallows it."""


class StopSignals:
    """Ctrl-C in a terminal reaches make, uv and this process, and uv forwards it too: two
    signals at once is the normal case. The first one stops the stack; later ones only say
    that it is stopping, since interrupting the shutdown is what left servers running.
    Inside `deferred()` (a process started but not yet recorded) the first one waits."""

    def __init__(self) -> None:
        self.stopping = threading.Event()
        self._deferring = False
        self._pending = False

    def install(self) -> None:
        for signum in STOP_SIGNALS:
            signal.signal(signum, self._handle)

    def _handle(self, signum: int, frame: object) -> None:
        if self.stopping.is_set():
            log(f"{signal.Signals(signum).name} again: already stopping, please wait")
            return
        self.stopping.set()
        log(f"{signal.Signals(signum).name}: stopping everything")
        if self._deferring:
            self._pending = True
            return
        raise Shutdown

    @contextlib.contextmanager
    def deferred(self) -> Iterator[None]:
        self._deferring = True
        try:
            yield
        finally:
            self._deferring = False
            if self._pending:
                self._pending = False
                raise Shutdown


class Stack:
    def __init__(self, args: argparse.Namespace, signals: StopSignals) -> None:
        self.args = args
        self.signals = signals
        self.data = Path(args.data_dir).resolve()
        self.pids = self.data / "pids"
        self.processes: list[Child] = []
        self.postgres: EmbeddedPostgres | None = None
        self.nats: EmbeddedNats | None = None
        self.nats_cluster: EmbeddedNatsCluster | None = None
        self.services = [
            service
            for service in SERVICES
            if args.services is None or service.name in args.services
        ]
        self.smtp: SmtpServer | None = None
        self.keys_lock = threading.Lock()
        self.ports = {
            service.name: free_port() if args.free_ports else service.port for service in SERVICES
        }

    def port_for(self, explicit: int | None, default: int) -> int:
        """A port given on the command line wins; else a free one (tests) or the default."""
        if explicit is not None:
            return explicit
        return free_port() if self.args.free_ports else default

    def probe_port(self, service: Service, n: int) -> int:
        """Worker n's probe port: the API's port plus 100 * n (8101 for webhook-hub's first
        worker), so a local Prometheus can keep one scrape config; a free one with
        --free-ports or when that port is taken."""
        port = service.port + 100 * n
        if self.args.free_ports or port_open("127.0.0.1", port):
            return free_port()
        return port

    def claim_data_dir(self) -> None:
        """Refuse a data directory another live stack uses; stop what a killed one left."""
        self.data.mkdir(parents=True, exist_ok=True)
        owner = read_pid_file(self.pids / "stack.json")
        if owner is not None and owner.pid != os.getpid() and recorded_process(owner):
            raise SystemExit(
                f"another stack (pid {owner.pid}) is running on {self.data}; stop it first"
            )
        self.stop_recorded(log_as="left by a stack that was killed")
        write_pid_file(self.pids / "stack.json", os.getpid())

    def stop_recorded(self, log_as: str) -> None:
        """Stop every process a pid file names that is still the one recorded: the services
        side by side, then NATS, then PostgreSQL, as an orderly stop would have done."""
        files = [p for p in self.pids.glob("*.json") if p.name != "stack.json"]
        for order in sorted({_stop_order(p) for p in files}):
            batch = [p for p in files if _stop_order(p) == order]
            with ThreadPoolExecutor(max_workers=len(batch)) as pool:
                stopped = list(pool.map(stop_pid_file, batch))
            for path, record in zip(batch, stopped, strict=True):
                if record is not None:
                    log(f"stopped {path.stem} (pid {record.pid}), {log_as}")

    def start_servers(self) -> tuple[str, str, str]:
        postgres_url = os.environ.get("DATABASE_URL")
        if postgres_url is None:
            port = self.port_for(self.args.postgres_port, 15432)
            if port_open("127.0.0.1", port):
                raise SystemExit(f"port {port} is taken; set --postgres-port or DATABASE_URL")
            self.postgres = EmbeddedPostgres(
                self.data / "postgres", port=port, durable=not self.args.ephemeral
            )
            log(f"starting PostgreSQL on 127.0.0.1:{port} (data in {self.postgres.data_dir})")
            self.postgres.start()
            self.record("postgres", self.postgres.pid, port, signal.SIGINT)
            postgres_url = self.postgres.url
        nats_url = os.environ.get("NATS_URL")
        if nats_url is None and self.args.nats_cluster:
            self.nats_cluster = EmbeddedNatsCluster(self.data / "nats-cluster", name="local")
            log(f"starting a {len(self.nats_cluster.nodes)}-node NATS JetStream cluster")
            self.nats_cluster.start()
            for node in self.nats_cluster.nodes:
                self.record(node.server_name, node.pid, node.port)
            nats_url = self.nats_cluster.url
        elif nats_url is None:
            port = self.port_for(self.args.nats_port, 14222)
            if port_open("127.0.0.1", port):
                raise SystemExit(f"port {port} is taken; set --nats-port or NATS_URL")
            self.nats = EmbeddedNats(self.data / "nats", port=port)
            log(f"starting NATS with JetStream on 127.0.0.1:{port}")
            self.nats.start()
            self.record("nats", self.nats.pid, port)
            nats_url = self.nats.url
        smtp_url = os.environ.get("SMTP_URL")
        if smtp_url is None:
            self.smtp = SmtpServer(
                port=self.port_for(self.args.smtp_port, 10025), directory=self.data / "mail"
            )
            self.smtp.start()
            smtp_url = self.smtp.url
            log(f"SMTP sink on {smtp_url}, mail filed in {self.data / 'mail'}")
        return postgres_url, nats_url, smtp_url

    def service_env(self, service: Service, servers: tuple[str, str, str]) -> dict[str, str]:
        postgres_url, nats_url, smtp_url = servers
        env = dict(os.environ)
        env.setdefault(
            f"{service.prefix}DATABASE_URL", database_url_for(postgres_url, service.database)
        )
        env.setdefault(f"{service.prefix}NATS_URL", nats_url)
        if self.nats_cluster is not None:  # not when NATS_URL names servers of one's own
            env.setdefault(
                f"{service.prefix}EVENTS_STREAM_REPLICAS", str(len(self.nats_cluster.nodes))
            )
        env.setdefault(f"{service.prefix}SMTP_URL", smtp_url)
        env[f"{service.prefix}PORT"] = str(self.ports[service.name])
        if service.name == "commerce-content":
            # The sandbox payment page calls this service back at its real address.
            env.setdefault(
                f"{service.prefix}PUBLIC_BASE_URL", f"http://127.0.0.1:{self.ports[service.name]}"
            )
        if service.name == "scraper-manager":
            # The crawler's address policy holds everywhere; on a developer's machine the sites
            # to crawl are often on loopback, which `make run` allows explicitly.
            env.setdefault(f"{service.prefix}ALLOWED_NETWORKS", '["127.0.0.0/8", "::1/128"]')
        if service.name == "commerce-content":
            # Set explicitly so `make run` can print it; the service's own development
            # default, so a console script in a second terminal agrees with it.
            env.setdefault(f"{service.prefix}CONTENT_API_KEY", _content_api_key_default())
        env.setdefault(f"{service.prefix}LOG_JSON", "false")
        return env

    def run_step(self, args: list[str], env: dict[str, str]) -> str:
        """A short command (migrate, seed, api-keys, tokens): in a session of its own, so
        Ctrl-C does not kill it half-way, and ended when the stack stops. Its stdout."""
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            process = subprocess.Popen(
                args,
                env=env,
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            while process.poll() is None:
                if self.signals.stopping.is_set():
                    process.terminate()
                    process.wait()
                    raise RuntimeError(f"{' '.join(args[:2])} interrupted: the stack is stopping")
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(0.1)
            out.seek(0)
            err.seek(0)
            if process.returncode != 0:
                raise StepFailed(args, process.returncode, err.read().decode(errors="replace"))
            return out.read().decode(errors="replace")

    def prepare(self, service: Service, env: dict[str, str]) -> str:
        """Database, migrations, demo data and the dev key of one service; returns the key.
        Services are prepared side by side: they share nothing but the keys file."""
        log(f"migrating {service.name}")
        self.run_step([str(BIN / service.name), "migrate", "--create-database"], env)
        if service.seeds:
            self.run_step([str(BIN / service.name), "seed"], env)
        return self.dev_key(service, env)

    def dev_key(self, service: Service, env: dict[str, str]) -> str:
        """One admin key per service, made once and kept with the data it belongs to."""
        keys_file = self.data / "dev-keys.json"
        with self.keys_lock:
            keys: dict[str, str] = json.loads(keys_file.read_text()) if keys_file.exists() else {}
        if service.name not in keys:
            output = self.run_step(
                [
                    str(BIN / service.name),
                    "api-keys",
                    "create",
                    "--owner",
                    "dev",
                    "--level",
                    "admin",
                    "--email",
                    "dev@localhost",
                ],
                env,
            )
            key = output.strip().splitlines()[-1]
            with self.keys_lock:
                keys = json.loads(keys_file.read_text()) if keys_file.exists() else {}
                keys[service.name] = key
                keys_file.write_text(json.dumps(keys, indent=2))
                keys_file.chmod(0o600)
        return keys[service.name]

    def dev_tokens(self, env: dict[str, str]) -> dict[str, dict[str, str]]:
        """A JWT per role for the demo user of that role, minted by commerce-content itself
        (`tokens create`), so they carry whatever secret, issuer and audience it is set to."""
        from commerce_content.seed import USERS

        emails = [email for email, _, _ in USERS]
        with psycopg.connect(env["COMMERCE_CONTENT_DATABASE_URL"]) as conn:
            rows = conn.execute(
                "SELECT role, min(id) FROM users WHERE email = ANY(%s) GROUP BY role", [emails]
            ).fetchall()
        users = {str(role): int(user_id) for role, user_id in rows}
        command = [str(BIN / "commerce-content"), "tokens", "create"]
        with ThreadPoolExecutor(max_workers=len(ROLES)) as pool:
            minted = {
                role: pool.submit(
                    self.run_step,
                    [
                        *command,
                        "--sub",
                        str(users[role]),
                        "--role",
                        role,
                        "--ttl",
                        str(DEV_TOKEN_TTL_SECONDS),
                    ],
                    env,
                )
                for role in ROLES
                if role in users
            }
            return {
                role: {"sub": str(users[role]), "token": future.result().strip().splitlines()[-1]}
                for role, future in minted.items()
            }

    def record(
        self,
        label: str,
        pid: int | None,
        port: int | None = None,
        stop_signal: int = signal.SIGTERM,
    ) -> None:
        if pid is not None:
            write_pid_file(self.pids / f"{label}.json", pid, port=port, stop_signal=stop_signal)

    def spawn(self, label: str, args: list[str], env: dict[str, str]) -> None:
        # Started and recorded as one step: a Ctrl-C in between would leave it unknown.
        with self.signals.deferred():
            process = self.start_process(label, args, env)
            self.processes.append(Child(label, args, env, process))
            self.record(label, process.pid)

    def start_process(
        self, label: str, args: list[str], env: dict[str, str]
    ) -> subprocess.Popen[bytes]:
        logs = self.data / "logs"
        logs.mkdir(exist_ok=True)
        output = (logs / f"{label}.log").open("ab")
        return subprocess.Popen(
            args,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )

    def wait_healthy(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        pending = {service.name: self.ports[service.name] for service in self.services}
        while pending and time.monotonic() < deadline:
            self.check_children()
            for name, port in list(pending.items()):
                # Not listening yet is the normal case while a service starts.
                with (
                    contextlib.suppress(OSError),
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as r,
                ):
                    if r.status == 200:
                        del pending[name]
            time.sleep(0.3)
        if pending:
            raise SystemExit(f"not ready after {timeout:.0f} s: {', '.join(pending)}")

    def check_children(self) -> None:
        for child in self.processes:
            if child.process.poll() is None:
                continue
            if not self.args.supervise:
                raise SystemExit(
                    f"{child.label} exited with {child.process.returncode};"
                    f" see {self.data / 'logs'}/{child.label}.log"
                )
            # Like an orchestrator's restart policy: the process comes back with the same
            # settings (and the same probe port).
            log(f"{child.label} exited with {child.process.returncode}; restarting it")
            child.restarts += 1
            with self.signals.deferred():
                child.process = self.start_process(child.label, child.args, child.env)
                self.record(child.label, child.process.pid)

    def run(self) -> None:
        self.claim_data_dir()
        servers = self.start_servers()
        summary: dict[str, Any] = {
            "services": {},
            "postgres_url": servers[0],
            "nats_url": servers[1],
            # Each node's server name (JetStream's, as stream info names a leader) and pid.
            "nats_nodes": [
                {"name": node.server_name, "url": node.url, "pid": node.pid}
                for node in (self.nats_cluster.nodes if self.nats_cluster else [])
            ],
            "smtp_url": servers[2],
            "mail_dir": str(self.data / "mail"),
            "data_dir": str(self.data),
            "pid": os.getpid(),
        }
        envs = {service.name: self.service_env(service, servers) for service in self.services}
        with ThreadPoolExecutor(max_workers=len(self.services)) as pool:
            prepared = {
                service.name: pool.submit(self.prepare, service, envs[service.name])
                for service in self.services
            }
            keys = {name: future.result() for name, future in prepared.items()}
        for service in self.services:
            env, key = envs[service.name], keys[service.name]
            self.spawn(f"{service.name}-api", [str(BIN / service.name), "serve"], env)
            workers = []
            for n in range(1, self.args.workers + 1):
                label = f"{service.name}-worker" + (f"-{n}" if self.args.workers > 1 else "")
                worker_env = dict(env)
                if self.args.worker_probes:
                    port = self.probe_port(service, n)
                    worker_env[f"{service.prefix}WORKER_PROBE_PORT"] = str(port)
                    workers.append({"label": label, "probe_url": f"http://127.0.0.1:{port}"})
                else:
                    workers.append({"label": label})
                self.spawn(label, [str(BIN / service.name), "worker"], worker_env)
            summary["services"][service.name] = {
                "url": f"http://127.0.0.1:{self.ports[service.name]}",
                "admin_key": key,
                "database_url": env[f"{service.prefix}DATABASE_URL"],
                "workers": workers,
            }
        if "commerce-content" in envs:
            content = envs["commerce-content"]
            summary["services"]["commerce-content"]["content_api_key"] = content[
                "COMMERCE_CONTENT_CONTENT_API_KEY"
            ]
            summary["services"]["commerce-content"]["tokens"] = self.dev_tokens(content)
        self.wait_healthy()
        if self.args.ready_file:
            Path(self.args.ready_file).write_text(json.dumps(summary, indent=2))
        print()
        for name, info in summary["services"].items():
            print(f"  {name:17} {info['url']}  (docs {info['url']}/docs)")
            print(f"  {'':17} dev admin key: {info['admin_key']}")
            print(f"  {'':17} metrics: {info['url']}/metrics (API)")
            for worker in info["workers"]:
                if "probe_url" in worker:
                    print(f"  {'':17} metrics: {worker['probe_url']}/metrics ({worker['label']})")
            if name == "commerce-content":
                print(f"  {'':17} GraphQL (GraphiQL in a browser): {info['url']}/graphql")
                print(f"  {'':17} content API key (X-API-Key): {info['content_api_key']}")
                for role, minted in info["tokens"].items():
                    print(f"  {'':17} dev JWT, {role} (user {minted['sub']}): {minted['token']}")
        print(
            f"\n  NATS {servers[1]}   mail in {self.data / 'mail'}   logs in {self.data / 'logs'}"
        )
        print("  Console scripts from a second terminal: .venv/bin/webhook-hub --help (and so on)")
        print("  Ctrl-C stops everything.\n", flush=True)
        while not self.signals.stopping.wait(0.5):
            self.check_children()

    def stop(self) -> None:
        """Services, then the SMTP sink, NATS and PostgreSQL. Runs to its end whatever
        signals arrive meanwhile (they only log); each step's failure is reported, not
        allowed to skip the steps after it."""
        self.signals.stopping.set()
        for child in self.processes:
            if child.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    child.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        for child in self.processes:
            try:
                child.process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log(f"{child.label} did not stop in time; killing it")
                child.process.kill()
                child.process.wait()
            (self.pids / f"{child.label}.json").unlink(missing_ok=True)
        steps = [
            ("the SMTP sink", self.smtp.stop if self.smtp else None, None),
            ("NATS", self.nats.stop if self.nats else None, "nats"),
            *(
                (f"NATS node {node.server_name}", node.stop, node.server_name)
                for node in (self.nats_cluster.nodes if self.nats_cluster else [])
            ),
            ("PostgreSQL", self.postgres.stop if self.postgres else None, "postgres"),
        ]
        for what, stop, label in steps:
            if stop is None:
                continue
            try:
                stop()
            except Exception as exc:  # reported; the servers after it must still stop
                log(f"stopping {what} failed: {exc!r}")
            if label is not None:
                (self.pids / f"{label}.json").unlink(missing_ok=True)
        self.stop_recorded(log_as="whose start was cut short")
        (self.pids / "stack.json").unlink(missing_ok=True)
        log("stopped")


class StepFailed(Exception):
    def __init__(self, args: list[str], code: int, stderr: str) -> None:
        lines = stderr.strip().splitlines()
        tail = chr(10).join(lines[-15:])
        super().__init__(
            f"{' '.join(Path(a).name for a in args[:3])} exited with {code}:{chr(10)}{tail}"
        )


def _stop_order(path: Path) -> int:
    """Services first, then NATS (a single server, or a cluster's nodes), then PostgreSQL."""
    if path.stem == "nats" or path.stem.startswith("local-"):
        return 1
    return {"postgres": 2}.get(path.stem, 0)


def _content_api_key_default() -> str:
    from commerce_content.settings import Settings

    default = Settings.model_fields["content_api_key"].default
    return str(default.get_secret_value())


def main(argv: list[str] | None = None) -> int:
    signals = StopSignals()
    signals.install()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", help="default .data/ (a temporary one with --ephemeral)")
    parser.add_argument("--postgres-port", type=int, help="default 15432")
    parser.add_argument("--nats-port", type=int, help="default 14222")
    parser.add_argument("--smtp-port", type=int, help="default 10025")
    parser.add_argument(
        "--free-ports", action="store_true", help="free ports for all not given explicitly"
    )
    parser.add_argument("--ephemeral", action="store_true", help="no fsync (and temporary data)")
    parser.add_argument("--ready-file", help="write URLs and keys as JSON here when ready")
    parser.add_argument("--workers", type=int, default=1, help="worker processes per service")
    parser.add_argument(
        "--supervise", action="store_true", help="restart processes that exit, do not stop"
    )
    parser.add_argument(
        "--worker-probes",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="each worker serves /healthz, /readyz and /metrics on a port of its own (default)",
    )
    parser.add_argument(
        "--nats-cluster",
        action="store_true",
        help="NATS as a 3-node JetStream cluster on loopback, EVENTS on 3 replicas",
    )
    parser.add_argument(
        "--services",
        nargs="+",
        choices=[service.name for service in SERVICES],
        help="start only these services (default: all three)",
    )
    args = parser.parse_args(argv)
    if args.data_dir is None:
        args.data_dir = tempfile.mkdtemp(prefix="platform-stack-") if args.ephemeral else ".data"
    stack = Stack(args, signals)
    code = 0
    try:
        try:
            stack.run()
        finally:
            signals.stopping.set()  # from here on a signal only logs
    except Shutdown:
        code = 0  # a signal asked for the stop: the normal end
    except StepFailed as exc:
        log(str(exc))
        code = 1
    except SystemExit as exc:
        if exc.code not in (None, 0):
            log(str(exc.code))
            code = 1
    finally:
        stack.stop()
    return code


if __name__ == "__main__":
    sys.exit(main())
