"""Persisted queries: Apollo's automatic persisted queries (APQ) and an allow-list mode.

A request may carry `extensions.persistedQuery = {version: 1, sha256Hash}` (in a POST body,
or as the `extensions` JSON parameter of a GET). With the hash alone, the document is looked
up: in this process's memory first, then in the `persisted_queries` table that every replica
shares; unknown, the answer is `PersistedQueryNotFound` and the client sends the hash with
the text, which is checked against the hash and stored once the operation has run
(so a document that does not even validate is never stored).

With `GRAPHQL_ALLOW_LIST` on, only documents imported from a manifest
(`commerce-content persisted-queries import FILE`) run, by hash or by text; requests never
register anything, and any other document is refused.

Everything from the request is parsed here by total functions: any JSON in, a reference or
a `PersistedQueryRefused` out.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from servicekit.retention import Progress, delete_in_batches, pruning_loop
from servicekit.worker import WorkerLoop
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlmodel.ext.asyncio.session import AsyncSession

from commerce_content.graphql_api.errors import BAD_USER_INPUT
from commerce_content.settings import Settings

VERSION = 1
_SHA256 = re.compile(r"[0-9a-f]{64}")
# Stored documents are bounded: a request is bounded by the token limit, not by its spacing.
MAX_DOCUMENT_CHARS = 100_000
CACHED_DOCUMENTS = 2048
# A document's `last_used_at` is written at most this often per process: pruning counts in
# days, and a read must not become a write per request.
TOUCH_SECONDS = 3600.0
PRUNE_LOOP = "persisted-query-retention"

NOT_FOUND = "PERSISTED_QUERY_NOT_FOUND"
NOT_ALLOWED = "PERSISTED_QUERY_NOT_ALLOWED"
# Apollo's: clients (apollo-link-persisted-queries, urql) match this message to send the text.
NOT_FOUND_MESSAGE = "PersistedQueryNotFound"
# Apollo Server's for PersistedQueryNotFound: the answer changes once the text is sent.
NOT_FOUND_CACHE_CONTROL = "private, no-cache, must-revalidate"


class PersistedQueryRefused(Exception):
    """A persisted-query request that cannot run: its HTTP status, GraphQL code, headers."""

    def __init__(
        self, status: int, message: str, code: str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.headers = headers or {}


def sha256_hex(document: str) -> str:
    return hashlib.sha256(document.encode("utf-8", "surrogatepass")).hexdigest()


def persisted_hash(extensions: Any) -> str | None:
    """The `sha256Hash` of `extensions.persistedQuery`, None when the request has none.
    `extensions` is a JSON object, or its text (a GET parameter)."""
    if extensions is None or extensions == "":
        return None
    if isinstance(extensions, str):
        try:
            extensions = json.loads(extensions)
        except (ValueError, RecursionError) as exc:
            raise PersistedQueryRefused(
                400, "extensions must be a JSON object", BAD_USER_INPUT
            ) from exc
    if not isinstance(extensions, dict):
        raise PersistedQueryRefused(400, "extensions must be a JSON object", BAD_USER_INPUT)
    persisted = extensions.get("persistedQuery")
    if persisted is None:
        return None
    if not isinstance(persisted, dict):
        raise PersistedQueryRefused(400, "persistedQuery must be an object", BAD_USER_INPUT)
    version = persisted.get("version")
    if version != VERSION or isinstance(version, bool):
        raise PersistedQueryRefused(400, "Unsupported persisted query version", BAD_USER_INPUT)
    digest = persisted.get("sha256Hash")
    if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
        raise PersistedQueryRefused(
            400, "sha256Hash must be 64 lowercase hexadecimal digits", BAD_USER_INPUT
        )
    return digest


@dataclass(frozen=True)
class Document:
    text: str
    registered: bool  # imported from a manifest (runs in allow-list mode)


@dataclass(frozen=True)
class Resolved:
    """The document to run, and the hash to store it under once it has run (APQ)."""

    query: str | None
    register: str | None = None


def decide(
    digest: str | None,
    query: Any,
    found: Document | None,
    *,
    allow_list: bool,
) -> Resolved:
    """What to do with a request, given the document stored under its hash (or under its
    text's hash when it has no hash). Pure: the endpoint looks `found` up."""
    has_text = isinstance(query, str) and bool(query.strip())
    if digest is None:
        if allow_list and has_text and (found is None or not found.registered):
            raise PersistedQueryRefused(
                400,
                "Only registered operations run on this server (allow-list mode); send the"
                " sha256Hash of an operation from its manifest",
                NOT_ALLOWED,
            )
        return Resolved(query)
    if has_text:
        assert isinstance(query, str)
        if sha256_hex(query) != digest:
            raise PersistedQueryRefused(
                400, "provided sha256Hash does not match the query", BAD_USER_INPUT
            )
        if allow_list:
            if found is None or not found.registered:
                raise PersistedQueryRefused(
                    400, "This operation is not registered (allow-list mode)", NOT_ALLOWED
                )
            return Resolved(query)
        if found is not None:
            return Resolved(query)
        if len(query) > MAX_DOCUMENT_CHARS:
            raise PersistedQueryRefused(
                400, f"A persisted query is at most {MAX_DOCUMENT_CHARS} characters", BAD_USER_INPUT
            )
        return Resolved(query, register=digest)
    if found is None or (allow_list and not found.registered):
        if allow_list:
            raise PersistedQueryRefused(
                400, "This operation is not registered (allow-list mode)", NOT_ALLOWED
            )
        raise PersistedQueryRefused(
            200, NOT_FOUND_MESSAGE, NOT_FOUND, {"Cache-Control": NOT_FOUND_CACHE_CONTROL}
        )
    return Resolved(found.text)


_LOOKUP = text("SELECT document, registered FROM persisted_queries WHERE sha256 = :sha256")
# A document stored by APQ keeps `registered` false; a manifest sets it true (never back).
_STORE = text(
    """
    INSERT INTO persisted_queries (sha256, document, registered, created_at, last_used_at)
    VALUES (:sha256, :document, :registered, now(), now())
    ON CONFLICT (sha256) DO UPDATE SET registered = persisted_queries.registered OR
        EXCLUDED.registered, last_used_at = now()
    """
)
# Used again: stored again too if pruned meanwhile (another replica may still have sent
# clients its hash from memory).
_TOUCH = text(
    """
    INSERT INTO persisted_queries (sha256, document, registered, created_at, last_used_at)
    VALUES (:sha256, :document, false, now(), now())
    ON CONFLICT (sha256) DO UPDATE SET last_used_at = now()
    """
)
# One batch of documents unused since the cutoff, by the partial index (delete_in_batches).
PRUNE_UNUSED = text(
    """
    DELETE FROM persisted_queries
    WHERE ctid = ANY(ARRAY(
        SELECT ctid FROM persisted_queries
        WHERE NOT registered AND last_used_at < :cutoff LIMIT :batch
    ))
    AND NOT registered AND last_used_at < :cutoff
    """
)


class PersistedQueryStore:
    """Hash -> document, shared by replicas in PostgreSQL, with this process's recently used
    documents in memory (a document never changes under its hash, so the copy never goes
    stale; only `registered` can turn true, which `find` checks in allow-list mode)."""

    def __init__(
        self,
        capacity: int = CACHED_DOCUMENTS,
        clock: Callable[[], float] = time.monotonic,
        touch_seconds: float = TOUCH_SECONDS,
    ) -> None:
        self.capacity = capacity
        self.clock = clock
        self.touch_seconds = touch_seconds
        self.cached: OrderedDict[str, Document] = OrderedDict()
        # When this process last wrote each cached document's `last_used_at`.
        self.touched: dict[str, float] = {}

    async def find(
        self, session: AsyncSession, digest: str, *, registered: bool = False
    ) -> Document | None:
        """The document under `digest`. With `registered` (allow-list mode), a copy not
        registered when it was read is read again: a manifest may have registered it since."""
        document = self.cached.get(digest)
        if document is not None and (document.registered or not registered):
            self.cached.move_to_end(digest)
            if self.clock() - self.touched.get(digest, float("-inf")) >= self.touch_seconds:
                await self._touch(session, digest, document)
            return document
        connection = await session.connection()
        row = (await connection.execute(_LOOKUP, {"sha256": digest})).first()
        if row is None:
            return None
        document = Document(row[0], bool(row[1]))
        self._keep(digest, document)
        await self._touch(session, digest, document)
        return document

    async def store(self, session: AsyncSession, digest: str, document: str) -> None:
        connection = await session.connection()
        await connection.execute(
            _STORE, {"sha256": digest, "document": document, "registered": False}
        )
        self._keep(digest, Document(document, False))
        self.touched[digest] = self.clock()

    async def _touch(self, session: AsyncSession, digest: str, document: Document) -> None:
        connection = await session.connection()
        await connection.execute(_TOUCH, {"sha256": digest, "document": document.text})
        self.touched[digest] = self.clock()

    def _keep(self, digest: str, document: Document) -> None:
        self.cached[digest] = document
        self.cached.move_to_end(digest)
        while len(self.cached) > self.capacity:
            dropped, _ = self.cached.popitem(last=False)
            self.touched.pop(dropped, None)


class InvalidManifest(ValueError):
    """A manifest the import refuses whole (unreadable, or a hash that is not its text's)."""


def manifest_operations(raw: Any) -> dict[str, str]:
    """Hash -> document from a manifest: Apollo's persisted query manifest
    (`{format: "apollo-persisted-query-manifest", version: 1, operations: [{id, body, ...}]}`)
    or a plain `{sha256: document}` object (graphql-codegen's, Relay's). Every hash must be
    its document's SHA-256."""
    pairs: list[tuple[Any, Any]]
    if isinstance(raw, dict) and raw.get("format") == "apollo-persisted-query-manifest":
        operations = raw.get("operations")
        if raw.get("version") != 1 or not isinstance(operations, list):
            raise InvalidManifest("an Apollo manifest has version 1 and a list of operations")
        pairs = []
        for index, operation in enumerate(operations):
            if not isinstance(operation, dict):
                raise InvalidManifest(f"operations[{index}] is not an object")
            pairs.append((operation.get("id"), operation.get("body")))
    elif isinstance(raw, dict):
        pairs = list(raw.items())
    else:
        raise InvalidManifest("a manifest is a JSON object")
    found: dict[str, str] = {}
    for digest, document in pairs:
        if not isinstance(digest, str) or not isinstance(document, str) or not document.strip():
            raise InvalidManifest(f"{digest!r}: an id and a document, both strings")
        if sha256_hex(document) != digest:
            raise InvalidManifest(f"{digest}: not the SHA-256 of its document")
        if len(document) > MAX_DOCUMENT_CHARS:
            raise InvalidManifest(f"{digest}: longer than {MAX_DOCUMENT_CHARS} characters")
        found[digest] = document
    return found


async def import_manifest(engine: AsyncEngine, operations: dict[str, str]) -> None:
    """Register every operation (one transaction): they run in allow-list mode."""
    async with engine.begin() as connection:
        for digest, document in operations.items():
            await connection.execute(
                _STORE, {"sha256": digest, "document": document, "registered": True}
            )


async def prune_unused(
    engine: AsyncEngine, cutoff: datetime, batch: int, progress: Progress = lambda: None
) -> int:
    """Delete the documents stored by APQ and not used since `cutoff`, `batch` per
    transaction (a manifest's are kept); how many."""
    return await delete_in_batches(
        engine, PRUNE_UNUSED, {"cutoff": cutoff}, batch=batch, progress=progress
    )


def persisted_query_retention_loop(settings: Settings) -> WorkerLoop | None:
    """Every `RETENTION_PRUNE_SECONDS`, the documents unused for
    `GRAPHQL_PERSISTED_QUERY_DAYS` deleted; none in allow-list mode, where requests store
    nothing and only a manifest's documents run."""
    if settings.graphql_allow_list:
        return None
    unused_for = timedelta(days=settings.graphql_persisted_query_days)
    batch = settings.retention_batch_size

    async def prune(engine: AsyncEngine, now: datetime, progress: Progress) -> int:
        return await prune_unused(engine, now - unused_for, batch, progress)

    return pruning_loop(PRUNE_LOOP, prune, settings.retention_prune_seconds)
