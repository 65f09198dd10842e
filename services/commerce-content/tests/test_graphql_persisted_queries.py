"""Persisted queries: Apollo's automatic persisted queries over POST and GET, their store
shared by replicas, and allow-list mode with a manifest imported by the console script."""

from __future__ import annotations

import hashlib
import json
import subprocess
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from commerce_content.app import create_app
from commerce_content.graphql_api.persisted import (
    NOT_ALLOWED,
    NOT_FOUND,
    Document,
    InvalidManifest,
    PersistedQueryRefused,
    PersistedQueryStore,
    decide,
    manifest_operations,
    persisted_hash,
    persisted_query_retention_loop,
    prune_unused,
)
from commerce_content.settings import Settings
from servicekit.testing import run_http_server
from servicekit.testing.conformance import run_cli
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlmodel.ext.asyncio.session import AsyncSession

from tests.factories import make_product


def sha256(document: str) -> str:
    return hashlib.sha256(document.encode()).hexdigest()


def fresh_query() -> str:
    """A document no other test has stored (its operation name is new)."""
    return f"query Q{uuid.uuid4().hex} {{ products(page: {{first: 1}}) {{ totalCount }} }}"


def persisted(digest: str) -> dict[str, Any]:
    return {"persistedQuery": {"version": 1, "sha256Hash": digest}}


@pytest.fixture
async def http(graphql_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=graphql_url.removesuffix("/graphql")) as client:
        yield client


@pytest.fixture
async def replica(service_settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """A second API process on the same database: another replica."""
    async with (
        run_http_server(create_app(service_settings)) as base_url,
        httpx.AsyncClient(base_url=base_url) as client,
    ):
        yield client


@pytest.fixture
async def allow_list(service_settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    settings = service_settings.model_copy(update={"graphql_allow_list": True})
    async with (
        run_http_server(create_app(settings)) as base_url,
        httpx.AsyncClient(base_url=base_url) as client,
    ):
        yield client


def get_params(digest: str, query: str | None = None) -> dict[str, str]:
    params = {"extensions": json.dumps(persisted(digest))}
    if query is not None:
        params["query"] = query
    return params


# The round trip.


async def test_apq_round_trip_over_post(http: httpx.AsyncClient, db_engine: AsyncEngine) -> None:
    await make_product(db_engine)
    query = fresh_query()
    digest = sha256(query)
    unknown = await http.post("/graphql", json={"extensions": persisted(digest)})
    assert unknown.status_code == 200
    assert unknown.json()["errors"][0]["message"] == "PersistedQueryNotFound"
    assert unknown.json()["errors"][0]["extensions"]["code"] == NOT_FOUND
    assert unknown.headers["cache-control"] == "private, no-cache, must-revalidate"
    with_text = await http.post("/graphql", json={"query": query, "extensions": persisted(digest)})
    assert with_text.status_code == 200
    assert with_text.json()["data"]["products"]["totalCount"] >= 1
    alone = await http.post("/graphql", json={"extensions": persisted(digest)})
    assert alone.status_code == 200
    assert alone.json()["data"] == with_text.json()["data"]


async def test_apq_round_trip_over_get_with_cache_control(
    http: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    await make_product(db_engine)
    query = fresh_query()
    digest = sha256(query)
    unknown = await http.get("/graphql", params=get_params(digest))
    assert unknown.json()["errors"][0]["extensions"]["code"] == NOT_FOUND
    assert unknown.headers["cache-control"] == "private, no-cache, must-revalidate"
    with_text = await http.get("/graphql", params=get_params(digest, query))
    assert with_text.status_code == 200
    alone = await http.get("/graphql", params=get_params(digest))
    assert alone.status_code == 200
    assert alone.json()["data"] == with_text.json()["data"]
    # products is @cacheControl(maxAge: 60) public, as the same query over POST says.
    assert alone.headers["cache-control"] == "max-age=60, public"
    assert alone.headers["vary"] == "Authorization"


async def test_a_document_stored_by_one_replica_runs_on_another(
    http: httpx.AsyncClient, replica: httpx.AsyncClient
) -> None:
    query = fresh_query()
    digest = sha256(query)
    stored = await http.post("/graphql", json={"query": query, "extensions": persisted(digest)})
    assert stored.status_code == 200
    elsewhere = await replica.post("/graphql", json={"extensions": persisted(digest)})
    assert elsewhere.status_code == 200
    assert "errors" not in elsewhere.json()
    assert elsewhere.json()["data"] == stored.json()["data"]


async def test_a_hash_that_does_not_match_the_text_is_refused_and_nothing_is_stored(
    http: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    query = fresh_query()
    wrong = sha256(query + " ")
    refused = await http.post("/graphql", json={"query": query, "extensions": persisted(wrong)})
    assert refused.status_code == 400
    assert "does not match" in refused.json()["errors"][0]["message"]
    async with db_engine.connect() as conn:
        count = await conn.scalar(
            text("SELECT count(*) FROM persisted_queries WHERE sha256 = :h"), {"h": wrong}
        )
    assert count == 0


async def test_a_document_that_does_not_validate_is_not_stored(http: httpx.AsyncClient) -> None:
    query = f"query Q{uuid.uuid4().hex} {{ noSuchField }}"
    digest = sha256(query)
    invalid = await http.post("/graphql", json={"query": query, "extensions": persisted(digest)})
    assert invalid.json()["errors"]
    later = await http.post("/graphql", json={"extensions": persisted(digest)})
    assert later.json()["errors"][0]["extensions"]["code"] == NOT_FOUND


async def test_a_persisted_mutation_over_get_is_405(http: httpx.AsyncClient) -> None:
    mutation = f'mutation M{uuid.uuid4().hex} {{ deleteProduct(id: "x") {{ deletedId }} }}'
    digest = sha256(mutation)
    refused = await http.get("/graphql", params=get_params(digest, mutation))
    assert refused.status_code == 405
    assert refused.headers["allow"] == "POST"


# Allow-list mode.


def write_manifest(tmp_path: Path, *documents: str) -> Path:
    manifest = {
        "format": "apollo-persisted-query-manifest",
        "version": 1,
        "operations": [
            {"id": sha256(d), "name": d.split()[1], "type": "query", "body": d} for d in documents
        ],
    }
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(manifest), encoding="utf-8")
    return path


async def test_allow_list_mode_runs_only_documents_imported_from_a_manifest(
    allow_list: httpx.AsyncClient, service_settings: Settings, tmp_path: Path
) -> None:
    registered, other = fresh_query(), fresh_query()
    imported = run_cli(
        "commerce-content",
        service_settings,
        "persisted-queries",
        "import",
        str(write_manifest(tmp_path, registered)),
    )
    assert "registered 1 operations" in imported.stdout
    by_hash = await allow_list.get("/graphql", params=get_params(sha256(registered)))
    assert by_hash.status_code == 200
    assert "errors" not in by_hash.json(), by_hash.text
    by_text = await allow_list.post("/graphql", json={"query": registered})
    assert by_text.status_code == 200
    assert "errors" not in by_text.json()
    for refused in [
        await allow_list.post("/graphql", json={"query": other}),
        await allow_list.post("/graphql", json={"extensions": persisted(sha256(other))}),
        await allow_list.post(
            "/graphql", json={"query": other, "extensions": persisted(sha256(other))}
        ),
    ]:
        assert refused.status_code == 400
        assert refused.json()["errors"][0]["extensions"]["code"] == NOT_ALLOWED
        assert "allow-list" in refused.json()["errors"][0]["message"]


async def test_allow_list_mode_refuses_a_document_stored_by_apq(
    http: httpx.AsyncClient, allow_list: httpx.AsyncClient
) -> None:
    query = fresh_query()
    digest = sha256(query)
    await http.post("/graphql", json={"query": query, "extensions": persisted(digest)})
    refused = await allow_list.post("/graphql", json={"extensions": persisted(digest)})
    assert refused.json()["errors"][0]["extensions"]["code"] == NOT_ALLOWED


async def test_a_document_refused_in_allow_list_mode_runs_once_a_manifest_registers_it(
    http: httpx.AsyncClient,
    allow_list: httpx.AsyncClient,
    service_settings: Settings,
    tmp_path: Path,
) -> None:
    query = fresh_query()
    digest = sha256(query)
    await http.post("/graphql", json={"query": query, "extensions": persisted(digest)})
    refused = await allow_list.post("/graphql", json={"extensions": persisted(digest)})
    assert refused.status_code == 400  # and the process has seen it unregistered
    run_cli(
        "commerce-content",
        service_settings,
        "persisted-queries",
        "import",
        str(write_manifest(tmp_path, query)),
    )
    allowed = await allow_list.post("/graphql", json={"extensions": persisted(digest)})
    assert allowed.status_code == 200
    assert "errors" not in allowed.json()


def test_importing_a_manifest_with_a_wrong_hash_fails_and_registers_nothing(
    service_settings: Settings, tmp_path: Path
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"0" * 64: fresh_query()}), encoding="utf-8")
    with pytest.raises(subprocess.CalledProcessError) as failed:
        run_cli("commerce-content", service_settings, "persisted-queries", "import", str(path))
    assert "not the SHA-256" in failed.value.stderr


# Decisions: pure functions.


@pytest.mark.parametrize(
    "extensions",
    [
        "{",
        "[]",
        {"persistedQuery": "x"},
        {"persistedQuery": {"version": 2, "sha256Hash": "0" * 64}},
        {"persistedQuery": {"version": True, "sha256Hash": "0" * 64}},
        {"persistedQuery": {"version": 1, "sha256Hash": "ABC"}},
        {"persistedQuery": {"version": 1, "sha256Hash": "A" * 64}},
    ],
)
def test_malformed_persisted_query_extensions_are_400(extensions: Any) -> None:
    with pytest.raises(PersistedQueryRefused) as refused:
        persisted_hash(extensions)
    assert refused.value.status == 400


def test_extensions_without_a_persisted_query_are_no_persisted_query() -> None:
    assert persisted_hash(None) is None
    assert persisted_hash({"tracing": True}) is None
    assert persisted_hash(json.dumps(persisted("a" * 64))) == "a" * 64


def test_apq_registers_a_new_document_only_outside_allow_list_mode() -> None:
    query = fresh_query()
    digest = sha256(query)
    assert decide(digest, query, None, allow_list=False).register == digest
    assert decide(digest, query, Document(query, False), allow_list=False).register is None
    assert decide(digest, None, Document(query, True), allow_list=True).query == query
    with pytest.raises(PersistedQueryRefused):
        decide(digest, query, None, allow_list=True)


def test_manifests_in_both_formats_are_read_and_checked() -> None:
    query = fresh_query()
    apollo = {
        "format": "apollo-persisted-query-manifest",
        "version": 1,
        "operations": [{"id": sha256(query), "body": query}],
    }
    assert manifest_operations(apollo) == {sha256(query): query}
    assert manifest_operations({sha256(query): query}) == {sha256(query): query}
    for bad in [[], {"a" * 64: query}, {sha256(query): 3}, {**apollo, "version": 2}]:
        with pytest.raises(InvalidManifest):
            manifest_operations(bad)


async def stored(engine: AsyncEngine, document: str, *, registered: bool, unused_days: int) -> str:
    digest = sha256(document)
    async with engine.begin() as conn:
        await conn.execute(
            text(
                "INSERT INTO persisted_queries (sha256, document, registered, created_at,"
                " last_used_at) VALUES (:sha256, :document, :registered, now(),"
                " now() - make_interval(days => :days))"
            ),
            {"sha256": digest, "document": document, "registered": registered, "days": unused_days},
        )
    return digest


async def kept(engine: AsyncEngine, *digests: str) -> set[str]:
    async with engine.connect() as conn:
        rows = await conn.execute(
            text("SELECT sha256 FROM persisted_queries WHERE sha256 = ANY(:digests)"),
            {"digests": list(digests)},
        )
        return {row.sha256 for row in rows}


async def last_used_days_ago(engine: AsyncEngine, digest: str) -> float:
    async with engine.connect() as conn:
        days = await conn.scalar(
            text(
                "SELECT extract(epoch FROM now() - last_used_at) / 86400"
                " FROM persisted_queries WHERE sha256 = :sha256"
            ),
            {"sha256": digest},
        )
    return float(days)


async def test_pruning_deletes_apq_documents_unused_past_the_cutoff_and_never_registered_ones(
    db_engine: AsyncEngine,
) -> None:
    old = await stored(db_engine, fresh_query(), registered=False, unused_days=40)
    older = await stored(db_engine, fresh_query(), registered=False, unused_days=90)
    recent = await stored(db_engine, fresh_query(), registered=False, unused_days=2)
    manifest = await stored(db_engine, fresh_query(), registered=True, unused_days=400)
    cutoff = datetime.now(UTC) - timedelta(days=30)
    assert await prune_unused(db_engine, cutoff, batch=1) >= 2
    assert await kept(db_engine, old, older, recent, manifest) == {recent, manifest}


async def test_a_document_found_is_marked_used_at_most_once_per_touch_interval(
    db_engine: AsyncEngine,
) -> None:
    now = [1000.0]
    store = PersistedQueryStore(clock=lambda: now[0], touch_seconds=3600)
    digest = await stored(db_engine, fresh_query(), registered=False, unused_days=20)
    async with AsyncSession(db_engine) as session, session.begin():
        assert await store.find(session, digest) is not None
    assert await last_used_days_ago(db_engine, digest) < 1
    async with db_engine.begin() as conn:  # as if used long ago: only a write would change it
        await conn.execute(
            text(
                "UPDATE persisted_queries SET last_used_at = now() - interval '20 days'"
                " WHERE sha256 = :sha256"
            ),
            {"sha256": digest},
        )
    now[0] += 60
    async with AsyncSession(db_engine) as session, session.begin():
        assert await store.find(session, digest) is not None
    assert await last_used_days_ago(db_engine, digest) > 19
    now[0] += 3600
    async with AsyncSession(db_engine) as session, session.begin():
        assert await store.find(session, digest) is not None
    assert await last_used_days_ago(db_engine, digest) < 1


async def test_a_document_pruned_while_a_replica_still_serves_it_is_stored_again(
    db_engine: AsyncEngine,
) -> None:
    now = [1000.0]
    store = PersistedQueryStore(clock=lambda: now[0], touch_seconds=3600)
    document = fresh_query()
    digest = await stored(db_engine, document, registered=False, unused_days=0)
    async with AsyncSession(db_engine) as session, session.begin():
        await store.find(session, digest)
    async with db_engine.begin() as conn:
        await conn.execute(
            text("DELETE FROM persisted_queries WHERE sha256 = :sha256"), {"sha256": digest}
        )
    now[0] += 3600
    async with AsyncSession(db_engine) as session, session.begin():
        found = await store.find(session, digest)
    assert found is not None
    assert found.text == document
    assert await kept(db_engine, digest) == {digest}


def test_the_worker_prunes_persisted_queries_only_outside_allow_list_mode(
    service_settings: Settings,
) -> None:
    assert persisted_query_retention_loop(service_settings) is not None
    allow_list = service_settings.model_copy(update={"graphql_allow_list": True})
    assert persisted_query_retention_loop(allow_list) is None
