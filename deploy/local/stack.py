"""`make run`: the whole platform on embedded PostgreSQL and NATS, on a machine with only Python.

Starts PostgreSQL and NATS (JetStream) from their PyPI wheels unless `DATABASE_URL`/`NATS_URL`
(or a service's prefixed variable) point elsewhere, an SMTP sink filing mail under
`<data>/mail/`, then per service: its database, its migrations, a dev admin key, its API and
its worker. Ctrl-C (or SIGTERM) stops every process it started, services first, servers last.
Data lives under `--data-dir` (default `.data/`) and survives restarts.
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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from servicekit.db.admin import database_url_for
from servicekit.embedded.nats import EmbeddedNats
from servicekit.embedded.network import free_port, port_open
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


def log(message: str) -> None:
    print(f"[stack] {message}", flush=True)


class Stack:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.data = Path(args.data_dir).resolve()
        self.processes: list[Child] = []
        self.postgres: EmbeddedPostgres | None = None
        self.nats: EmbeddedNats | None = None
        self.smtp: SmtpServer | None = None
        self.keys_lock = threading.Lock()
        self.ports = {
            service.name: free_port() if args.free_ports else service.port for service in SERVICES
        }

    def port_or_free(self, preferred: int) -> int:
        return free_port() if self.args.free_ports else preferred

    def start_servers(self) -> tuple[str, str, str]:
        self.data.mkdir(parents=True, exist_ok=True)
        postgres_url = os.environ.get("DATABASE_URL")
        if postgres_url is None:
            port = self.port_or_free(self.args.postgres_port)
            if port_open("127.0.0.1", port):
                raise SystemExit(f"port {port} is taken; set --postgres-port or DATABASE_URL")
            self.postgres = EmbeddedPostgres(
                self.data / "postgres", port=port, durable=not self.args.ephemeral
            )
            log(f"starting PostgreSQL on 127.0.0.1:{port} (data in {self.postgres.data_dir})")
            self.postgres.start()
            postgres_url = self.postgres.url
        nats_url = os.environ.get("NATS_URL")
        if nats_url is None:
            port = self.port_or_free(self.args.nats_port)
            if port_open("127.0.0.1", port):
                raise SystemExit(f"port {port} is taken; set --nats-port or NATS_URL")
            self.nats = EmbeddedNats(self.data / "nats", port=port)
            log(f"starting NATS with JetStream on 127.0.0.1:{port}")
            self.nats.start()
            nats_url = self.nats.url
        smtp_url = os.environ.get("SMTP_URL")
        if smtp_url is None:
            self.smtp = SmtpServer(
                port=self.port_or_free(self.args.smtp_port), directory=self.data / "mail"
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
        env.setdefault(f"{service.prefix}LOG_JSON", "false")
        return env

    def prepare(self, service: Service, env: dict[str, str]) -> str:
        """Database, migrations, demo data and the dev key of one service; returns the key.
        Services are prepared side by side: they share nothing but the keys file."""
        log(f"migrating {service.name}")
        subprocess.run(
            [str(BIN / service.name), "migrate", "--create-database"],
            env=env,
            check=True,
            capture_output=True,
        )
        if service.seeds:
            subprocess.run(
                [str(BIN / service.name), "seed"], env=env, check=True, capture_output=True
            )
        return self.dev_key(service, env)

    def dev_key(self, service: Service, env: dict[str, str]) -> str:
        """One admin key per service, made once and kept with the data it belongs to."""
        keys_file = self.data / "dev-keys.json"
        with self.keys_lock:
            keys: dict[str, str] = json.loads(keys_file.read_text()) if keys_file.exists() else {}
        if service.name not in keys:
            result = subprocess.run(
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
                env=env,
                check=True,
                capture_output=True,
                text=True,
            )
            key = result.stdout.strip().splitlines()[-1]
            with self.keys_lock:
                keys = json.loads(keys_file.read_text()) if keys_file.exists() else {}
                keys[service.name] = key
                keys_file.write_text(json.dumps(keys, indent=2))
                keys_file.chmod(0o600)
        return keys[service.name]

    def spawn(self, label: str, args: list[str], env: dict[str, str]) -> None:
        self.processes.append(Child(label, args, env, self.start_process(label, args, env)))

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
        pending = dict(self.ports)
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
            child.process = self.start_process(child.label, child.args, child.env)

    def run(self) -> None:
        servers = self.start_servers()
        summary: dict[str, Any] = {
            "services": {},
            "nats_url": servers[1],
            "smtp_url": servers[2],
            "mail_dir": str(self.data / "mail"),
            "pid": os.getpid(),
        }
        envs = {service.name: self.service_env(service, servers) for service in SERVICES}
        with ThreadPoolExecutor(max_workers=len(SERVICES)) as pool:
            prepared = {
                service.name: pool.submit(self.prepare, service, envs[service.name])
                for service in SERVICES
            }
            keys = {name: future.result() for name, future in prepared.items()}
        for service in SERVICES:
            env, key = envs[service.name], keys[service.name]
            self.spawn(f"{service.name}-api", [str(BIN / service.name), "serve"], env)
            workers = []
            for n in range(1, self.args.workers + 1):
                label = f"{service.name}-worker" + (f"-{n}" if self.args.workers > 1 else "")
                worker_env = dict(env)
                if self.args.worker_probes:
                    port = free_port()
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
        self.wait_healthy()
        if self.args.ready_file:
            Path(self.args.ready_file).write_text(json.dumps(summary, indent=2))
        print()
        for name, info in summary["services"].items():
            print(f"  {name:17} {info['url']}  (docs {info['url']}/docs)")
            print(f"  {'':17} dev admin key: {info['admin_key']}")
            if name == "commerce-content":
                print(f"  {'':17} GraphQL (GraphiQL in a browser): {info['url']}/graphql")
        print(
            f"\n  NATS {servers[1]}   mail in {self.data / 'mail'}   logs in {self.data / 'logs'}"
        )
        print("  Ctrl-C stops everything.\n", flush=True)
        while True:
            self.check_children()
            time.sleep(0.5)

    def stop(self) -> None:
        for child in self.processes:
            if child.process.poll() is None:
                child.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 15
        for child in self.processes:
            try:
                child.process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log(f"{child.label} did not stop in time; killing it")
                child.process.kill()
                child.process.wait()
        if self.smtp is not None:
            self.smtp.stop()
        if self.nats is not None:
            self.nats.stop()
        if self.postgres is not None:
            self.postgres.stop()
        log("stopped")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=".data")
    parser.add_argument("--postgres-port", type=int, default=15432)
    parser.add_argument("--nats-port", type=int, default=14222)
    parser.add_argument("--smtp-port", type=int, default=10025)
    parser.add_argument("--free-ports", action="store_true", help="pick free ports for all")
    parser.add_argument("--ephemeral", action="store_true", help="temporary data, no fsync")
    parser.add_argument("--ready-file", help="write URLs and keys as JSON here when ready")
    parser.add_argument("--workers", type=int, default=1, help="worker processes per service")
    parser.add_argument(
        "--supervise", action="store_true", help="restart processes that exit, do not stop"
    )
    parser.add_argument(
        "--worker-probes", action="store_true", help="workers serve /healthz, /readyz, /metrics"
    )
    args = parser.parse_args(argv)
    if args.ephemeral:
        args.data_dir = tempfile.mkdtemp(prefix="platform-stack-")
    stack = Stack(args)

    def on_signal(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        stack.run()
    except KeyboardInterrupt:
        log("stopping")
    except SystemExit as exc:
        if exc.code not in (None, 0):
            log(str(exc.code))
        stack.stop()
        return 1
    stack.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
