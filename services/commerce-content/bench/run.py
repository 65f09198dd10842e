"""`make bench` for commerce-content: GraphQL `products(first: 50)` with pricing and variants
against the REST product listing, same server, same data, same run.

Starts embedded PostgreSQL and NATS, loads 10,000 published products with 3 variants each,
starts `commerce-content serve` (one uvicorn process), warms both endpoints up, then drives
each with the same number of concurrent clients for the same time and prints requests/s and
latency percentiles. The equivalent REST listing is the resource API's
`GET /api/v1/products?limit=50&include=variants` (the same products, pricing and variants,
the same bearer JWT); the content API's listing (no variants, an API key) is shown for
reference.

GraphQL also runs as a persisted query over GET (Apollo's APQ: the hash in `extensions`, the
variables in the address; registered once with its text before measuring), as a CDN-fronted
storefront sends it. Each endpoint runs `--rounds` times, the endpoints taking turns, so a
shared machine's load changes hit them alike; the ratios are of the totals.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import aiohttp
import psycopg
import uvloop
from servicekit.db.admin import database_url_for, ensure_database
from servicekit.db.migrations import upgrade
from servicekit.embedded.nats import EmbeddedNats
from servicekit.embedded.network import free_port, wait_for_port
from servicekit.embedded.postgres import EmbeddedPostgres
from yarl import URL

HERE = Path(__file__).resolve().parent
MIGRATIONS = HERE.parent / "migrations"
BIN = Path(sys.executable).parent
CONTENT_KEY = "bench-content-api-key"
GRAPHQL_QUERY = """
query Page($first: Int!) {
  products(page: {first: $first}) {
    edges { cursor node { id name pricing { basePrice salePrice currency }
      variants { id sku name price inStock } } }
    pageInfo { hasNextPage endCursor }
  }
}
"""
GRAPHQL_HASH = hashlib.sha256(GRAPHQL_QUERY.encode()).hexdigest()
PERSISTED = json.dumps({"persistedQuery": {"version": 1, "sha256Hash": GRAPHQL_HASH}})
REST_NAME = "REST  /api/v1/products (+variants)"
GRAPHQL_NAME = "GraphQL products(first: 50)"
PERSISTED_NAME = "GraphQL persisted query, GET"
TARGETS = {GRAPHQL_NAME: 1.0, PERSISTED_NAME: 1.2}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def load_catalogue(database_url: str, products: int, variants: int) -> None:
    rng = random.Random(7)  # noqa: S311 - demo prices, not secrets
    with psycopg.connect(database_url) as conn:
        if conn.execute("SELECT count(*) FROM products").fetchone() == (products,):
            return
        with conn.cursor().copy(
            "COPY products (name, slug, description, base_price, sale_price, currency, stock,"
            " image, tags, parent_id, menu_index, published, deleted, created_at, updated_at)"
            " FROM STDIN"
        ) as copy:
            for n in range(products):
                price = Decimal(rng.randint(300, 20000)) / 100
                sale = (price * Decimal("0.8")).quantize(Decimal("0.01")) if n % 4 == 0 else None
                copy.write_row(
                    (
                        f"Product {n}",
                        f"product-{n}",
                        f"Demo product number {n}",
                        price,
                        sale,
                        "USD",
                        rng.randint(0, 50),
                        "",
                        ["demo"],
                        1,
                        n,
                        True,
                        False,
                        "2026-01-01T00:00:00Z",
                        "2026-01-01T00:00:00Z",
                    )
                )
        ids = [row[0] for row in conn.execute("SELECT id FROM products ORDER BY id")]
        with conn.cursor().copy(
            "COPY product_variants (product_id, sku, name, price, stock) FROM STDIN"
        ) as copy:
            for product_id in ids:
                for v in range(variants):
                    copy.write_row((product_id, f"SKU-{product_id}-{v}", f"Size {v}", None, v * 3))
        conn.execute("ANALYZE products; ANALYZE product_variants")


def bench_user(database_url: str) -> int:
    """The user the benchmark's token names (a token whose `sub` names no user is refused)."""
    with psycopg.connect(database_url) as conn:
        conn.execute(
            "INSERT INTO users (email, name, role, created_at)"
            " VALUES ('bench@example.com', 'Bench', 'user', now()) ON CONFLICT (email) DO NOTHING"
        )
        row = conn.execute("SELECT id FROM users WHERE email = 'bench@example.com'").fetchone()
    assert row is not None
    return int(row[0])


async def drive(
    url: URL,
    *,
    method: str,
    body: bytes | None,
    headers: dict[str, str],
    seconds: float,
    clients: int,
) -> dict[str, Any]:
    latencies: list[float] = []
    failures = 0
    deadline = time.perf_counter() + seconds
    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=connector) as http:

        async def client() -> None:
            nonlocal failures
            while time.perf_counter() < deadline:
                started = time.perf_counter()
                async with http.request(method, url, data=body, headers=headers) as response:
                    payload = await response.read()
                    if response.status != 200 or b'"errors"' in payload:
                        failures += 1
                latencies.append(time.perf_counter() - started)

        started = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(clients)))
        elapsed = time.perf_counter() - started
    return {
        "latencies": latencies,
        "elapsed": elapsed,
        "failures": failures,
        "rps": len(latencies) / elapsed,
    }


async def measure(
    base: str, token: str, seconds: float, clients: int, page: int, rounds: int
) -> dict[str, dict[str, Any]]:
    bearer = {"Authorization": f"Bearer {token}"}
    json_bearer = {**bearer, "Content-Type": "application/json"}
    variables = {"first": page}
    graphql_body = json.dumps({"query": GRAPHQL_QUERY, "variables": variables}).encode()
    address = urlencode({"variables": json.dumps(variables), "extensions": PERSISTED})
    # Addresses parsed and bodies encoded once: the clients share the server's cores, so
    # their per-request work (yarl re-quoting a long address, JSON encoding) is kept out.
    targets: dict[str, tuple[URL, str, bytes | None, dict[str, str]]] = {
        REST_NAME: (
            URL(f"{base}/api/v1/products?limit={page}&include=variants", encoded=True),
            "GET",
            None,
            bearer,
        ),
        GRAPHQL_NAME: (URL(f"{base}/graphql"), "POST", graphql_body, json_bearer),
        PERSISTED_NAME: (URL(f"{base}/graphql?{address}", encoded=True), "GET", None, bearer),
        "(content API /api/products/, no variants)": (
            URL(f"{base}/api/products/?limit={page}", encoded=True),
            "GET",
            None,
            {"X-API-Key": CONTENT_KEY},
        ),
    }
    async with aiohttp.ClientSession() as http:  # APQ: the hash with its text stores it
        register = {
            "query": GRAPHQL_QUERY,
            "variables": variables,
            "extensions": json.loads(PERSISTED),
        }
        async with http.post(f"{base}/graphql", json=register, headers=bearer) as response:
            assert response.status == 200, await response.text()
    for url, method, body, headers in targets.values():  # warm-up: pools, caches, JIT-free paths
        await drive(url, method=method, body=body, headers=headers, seconds=2, clients=clients)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in targets}
    for _ in range(rounds):
        for name, (url, method, body, headers) in targets.items():
            runs[name].append(
                await drive(
                    url, method=method, body=body, headers=headers, seconds=seconds, clients=clients
                )
            )
    return {name: combined(rows) for name, rows in runs.items()}


def combined(rows: list[dict[str, Any]]) -> dict[str, Any]:
    latencies = [latency for row in rows for latency in row["latencies"]]
    elapsed = sum(row["elapsed"] for row in rows)
    return {
        "requests": len(latencies),
        "failures": sum(row["failures"] for row in rows),
        "rps": len(latencies) / elapsed,
        "p50_ms": percentile(latencies, 0.50) * 1000,
        "p99_ms": percentile(latencies, 0.99) * 1000,
        "rounds_rps": [row["rps"] for row in rows],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--products", type=int, default=10_000)
    parser.add_argument("--variants", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3, help="turns of each endpoint")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cc-bench-") as tmp:
        workdir = Path(tmp)
        postgres, nats = EmbeddedPostgres(workdir / "pg"), EmbeddedNats(workdir / "nats")
        server: subprocess.Popen[bytes] | None = None
        postgres.start()
        nats.start()
        try:
            database_url = database_url_for(postgres.url, "commerce_content_bench")
            ensure_database(database_url)
            upgrade(MIGRATIONS, database_url)
            load_catalogue(database_url, args.products, args.variants)
            user_id = bench_user(database_url)
            port = free_port()
            env = {
                **os.environ,
                "COMMERCE_CONTENT_DATABASE_URL": database_url,
                "COMMERCE_CONTENT_NATS_URL": nats.url,
                "COMMERCE_CONTENT_PORT": str(port),
                "COMMERCE_CONTENT_CONTENT_API_KEY": CONTENT_KEY,
                "COMMERCE_CONTENT_LOG_LEVEL": "WARNING",
                # The benchmark measures throughput, not the per-client limit.
                "COMMERCE_CONTENT_RATE_LIMIT": "100000000/minute",
            }
            token = (
                subprocess.run(
                    [
                        str(BIN / "commerce-content"),
                        "tokens",
                        "create",
                        "--sub",
                        str(user_id),
                        "--role",
                        "user",
                    ],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                )
                .stdout.strip()
                .splitlines()[-1]
            )
            server = subprocess.Popen(
                [str(BIN / "commerce-content"), "serve"],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            wait_for_port("127.0.0.1", port, 60)
            results = uvloop.run(
                measure(
                    f"http://127.0.0.1:{port}", token, args.seconds, args.clients, 50, args.rounds
                )
            )
        finally:
            if server is not None:
                server.terminate()
                server.wait(20)
            nats.stop()
            postgres.stop()
    print(
        f"\ncommerce-content: {args.products:,} products x {args.variants} variants,"
        f" {args.clients} concurrent clients, {args.rounds} rounds of {args.seconds:.0f} s each,"
        " one server process,"
        f" {os.cpu_count()} cores"
    )
    print(
        f"{'endpoint':<42} {'requests':>9} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7}"
    )
    for name, row in results.items():
        print(
            f"{name:<42} {row['requests']:>9} {row['rps']:>8.1f} {row['p50_ms']:>8.1f}"
            f" {row['p99_ms']:>8.1f} {row['failures']:>7}"
        )
    rest = results[REST_NAME]["rps"]
    ratios = {}
    for name, target in TARGETS.items():
        ratio = results[name]["rps"] / rest if rest else float("nan")
        per_round = ", ".join(
            f"{mine / theirs:.2f}"
            for mine, theirs in zip(
                results[name]["rounds_rps"], results[REST_NAME]["rounds_rps"], strict=True
            )
        )
        verdict = "met" if ratio >= target else "MISSED"
        print(
            f"{name} / REST throughput: {ratio:.2f}x (rounds: {per_round});"
            f" target at least {target:.1f}x {verdict}"
        )
        ratios[name] = round(ratio, 3)
    print(
        json.dumps(
            {
                "graphql_to_rest": ratios[GRAPHQL_NAME],
                "persisted_get_to_rest": ratios[PERSISTED_NAME],
            }
        )
    )


if __name__ == "__main__":
    main()
