"""`make bench`: what a persisted query's hash costs to resolve, from the PostgreSQL table
every replica shares and from a process's in-memory copy.

Starts embedded PostgreSQL, stores 10,000 documents of a product page's size, then resolves
random hashes through `PersistedQueryStore.find` on one pooled connection: first with the
memory copy bypassed (a replica's first sight of a hash: one primary-key SELECT), then with
it (every later request). Prints microseconds per lookup.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import tempfile
import time
from pathlib import Path

from commerce_content.graphql_api.persisted import PersistedQueryStore
from servicekit.db.admin import database_url_for, ensure_database
from servicekit.db.engine import to_sqlalchemy_url
from servicekit.db.migrations import upgrade
from servicekit.embedded.postgres import EmbeddedPostgres
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine
from sqlmodel.ext.asyncio.session import AsyncSession

MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"
DOCUMENTS = 10_000
LOOKUPS = 5_000
PAGE = (
    "query Page{n}($first: Int!) {{ products(page: {{first: $first}}) {{ edges {{ cursor node"
    " {{ id name pricing {{ basePrice salePrice currency }} variants {{ id sku name price"
    " inStock }} }} }} pageInfo {{ hasNextPage endCursor }} }} }}"
)


async def measure(database_url: str) -> None:
    engine = create_async_engine(to_sqlalchemy_url(database_url), pool_size=1)
    documents = [PAGE.format(n=n) for n in range(DOCUMENTS)]
    hashes = [hashlib.sha256(d.encode()).hexdigest() for d in documents]
    async with engine.begin() as conn:
        await conn.execute(
            text(
                "INSERT INTO persisted_queries (sha256, document, registered, created_at)"
                " VALUES (:sha256, :document, false, now()) ON CONFLICT DO NOTHING"
            ),
            [{"sha256": h, "document": d} for h, d in zip(hashes, documents, strict=True)],
        )
    rng = random.Random(3)  # noqa: S311 - which hashes to ask for, not a secret
    wanted = [rng.choice(hashes) for _ in range(LOOKUPS)]
    async with AsyncSession(engine) as session:
        await session.connection()  # the pool's connection, taken once like a request's
        for label, capacity in (("PostgreSQL (memory copy off)", 0), ("in-memory copy", DOCUMENTS)):
            store = PersistedQueryStore(capacity)
            for digest in wanted[:200]:  # warm-up (and the memory copy filled)
                await store.find(session, digest)
            if capacity:
                for digest in hashes:
                    await store.find(session, digest)
            started = time.perf_counter()
            for digest in wanted:
                assert await store.find(session, digest) is not None
            elapsed = time.perf_counter() - started
            print(f"{label:32} {elapsed / LOOKUPS * 1e6:8.1f} us per lookup")
    await engine.dispose()


def main() -> None:
    print(f"commerce-content: persisted query lookups, {DOCUMENTS} documents, {LOOKUPS} lookups")
    with tempfile.TemporaryDirectory(prefix="cc-apq-bench-") as workdir:
        postgres = EmbeddedPostgres(Path(workdir) / "pg")
        postgres.start()
        try:
            database_url = database_url_for(postgres.url, "commerce_content_apq_bench")
            ensure_database(database_url)
            upgrade(MIGRATIONS, database_url)
            asyncio.run(measure(database_url))
        finally:
            postgres.stop()


if __name__ == "__main__":
    main()
