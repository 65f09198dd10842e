"""/api/v1/articles: envelopes, statuses, filters, sorting, includes, paging, versions."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from commerce_content.app import create_app
from commerce_content.settings import Settings
from servicekit.testing import serve_app
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.factories import article_body, bearer_for, make_user

BASE = "/api/v1/articles"


@pytest.fixture
async def manager(db_engine: AsyncEngine, service_settings: Settings) -> dict[str, Any]:
    user_id = await make_user(db_engine, "manager", name="Grace")
    return {"id": user_id, "headers": bearer_for(service_settings, user_id, "manager")}


async def create(
    client: httpx.AsyncClient, headers: dict[str, str], **body: object
) -> dict[str, Any]:
    response = await client.post(BASE, json=article_body(**body), headers=headers)
    assert response.status_code == 201, response.text
    return dict(response.json()["data"])


async def test_create_answers_201_with_the_single_envelope(
    client: httpx.AsyncClient, manager: dict[str, Any]
) -> None:
    response = await client.post(
        BASE,
        json=article_body(title="Hello World", tags=["News", "launch"]),
        headers=manager["headers"],
    )
    assert response.status_code == 201
    data = response.json()["data"]
    assert set(response.json()) == {"data"}
    assert data["slug"] == "hello-world"
    assert data["author_id"] == manager["id"]
    assert [t["name"] for t in data["tags"]] == ["news", "launch"]
    assert data["published_at"] is not None
    assert response.headers["content-type"].startswith("application/vnd.commerce.v1+json")


async def test_a_taken_slug_is_409(client: httpx.AsyncClient, manager: dict[str, Any]) -> None:
    first = await create(client, manager["headers"])
    response = await client.post(
        BASE, json=article_body(slug=first["slug"]), headers=manager["headers"]
    )
    assert response.status_code == 409
    assert response.json() == {
        "error": {
            "code": "slug_taken",
            "message": f"The slug '{first['slug']}' is already used by another article",
        }
    }


async def test_an_unknown_author_is_422(client: httpx.AsyncClient, manager: dict[str, Any]) -> None:
    response = await client.post(
        BASE, json=article_body(author_id=999_999), headers=manager["headers"]
    )
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "unknown_author"


async def test_invalid_bodies_are_400_in_the_error_envelope(
    client: httpx.AsyncClient, manager: dict[str, Any]
) -> None:
    for body in (
        {"title": ""},
        {"title": "x", "status": "live"},
        {"title": "x", "slug": "Bad Slug"},
    ):
        response = await client.post(BASE, json=body, headers=manager["headers"])
        assert response.status_code == 400
        assert response.json()["error"]["code"] == "validation_error"
    malformed = await client.post(
        BASE, content=b"{oops", headers={**manager["headers"], "content-type": "application/json"}
    )
    assert malformed.status_code == 400


async def test_no_token_is_401_and_a_bad_token_is_401(client: httpx.AsyncClient) -> None:
    missing = await client.get(BASE)
    assert missing.status_code == 401
    assert missing.json()["error"]["code"] == "unauthorized"
    forged = await client.get(BASE, headers={"Authorization": "Bearer a.b.c"})
    assert forged.status_code == 401
    assert forged.json()["error"]["message"] == "Invalid token"


async def test_a_user_may_read_but_not_write(
    client: httpx.AsyncClient, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    user_id = await make_user(db_engine, "user")
    headers = bearer_for(service_settings, user_id, "user")
    assert (await client.get(BASE, headers=headers)).status_code == 200
    response = await client.post(BASE, json=article_body(), headers=headers)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "forbidden"


async def test_get_one_and_404(client: httpx.AsyncClient, manager: dict[str, Any]) -> None:
    article = await create(client, manager["headers"])
    found = await client.get(f"{BASE}/{article['id']}", headers=manager["headers"])
    assert found.status_code == 200
    assert found.json()["data"]["id"] == article["id"]
    assert "author" not in found.json()["data"]
    missing = await client.get(f"{BASE}/999999", headers=manager["headers"])
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"


async def test_put_replaces_and_needs_every_field(
    client: httpx.AsyncClient, manager: dict[str, Any]
) -> None:
    article = await create(client, manager["headers"])
    partial = await client.put(
        f"{BASE}/{article['id']}", json={"title": "Only"}, headers=manager["headers"]
    )
    assert partial.status_code == 400
    full = {
        "title": "Replaced",
        "slug": f"replaced-{article['id']}",
        "body": "New",
        "status": "archived",
        "author_id": manager["id"],
        "tags": [],
    }
    replaced = await client.put(f"{BASE}/{article['id']}", json=full, headers=manager["headers"])
    assert replaced.status_code == 200
    data = replaced.json()["data"]
    assert (data["title"], data["status"], data["body"], data["tags"]) == (
        "Replaced",
        "archived",
        "New",
        [],
    )


async def test_patch_changes_only_the_given_fields(
    client: httpx.AsyncClient, manager: dict[str, Any]
) -> None:
    article = await create(client, manager["headers"], body="Original")
    patched = await client.patch(
        f"{BASE}/{article['id']}", json={"title": "Patched"}, headers=manager["headers"]
    )
    assert patched.status_code == 200
    assert patched.json()["data"]["title"] == "Patched"
    assert patched.json()["data"]["body"] == "Original"


async def test_delete_is_204_then_404(client: httpx.AsyncClient, manager: dict[str, Any]) -> None:
    article = await create(client, manager["headers"])
    deleted = await client.delete(f"{BASE}/{article['id']}", headers=manager["headers"])
    assert deleted.status_code == 204
    assert (
        await client.get(f"{BASE}/{article['id']}", headers=manager["headers"])
    ).status_code == 404


async def test_deleting_an_article_deletes_its_comments(
    client: httpx.AsyncClient, manager: dict[str, Any]
) -> None:
    article = await create(client, manager["headers"])
    commented = await client.post(
        f"{BASE}/{article['id']}/comments", json={"body": "first!"}, headers=manager["headers"]
    )
    assert commented.status_code == 201
    deleted = await client.delete(f"{BASE}/{article['id']}", headers=manager["headers"])
    assert deleted.status_code == 204
    comments = await client.get(f"{BASE}/{article['id']}/comments", headers=manager["headers"])
    assert comments.status_code == 404


async def test_ids_beyond_the_database_range_are_400_not_500(
    client: httpx.AsyncClient, manager: dict[str, Any]
) -> None:
    huge = 2**31
    for method, url in (
        ("GET", f"{BASE}/{huge}"),
        ("DELETE", f"{BASE}/{huge}"),
        ("GET", f"{BASE}?after_id={huge}"),
        ("GET", f"{BASE}?author_id={huge}"),
    ):
        response = await client.request(method, url, headers=manager["headers"])
        assert response.status_code == 400, (method, url, response.text)


async def test_a_page_number_beyond_the_database_range_is_400_not_500(
    client: httpx.AsyncClient, manager: dict[str, Any]
) -> None:
    for page in ("99999999999999999999", str(2**31)):
        response = await client.get(BASE, params={"page": page}, headers=manager["headers"])
        assert response.status_code == 400, (page, response.text)
        assert response.json()["error"]["code"] == "validation_error"


@pytest.mark.parametrize("author_id", [2**31, 2**64, 10**30])
async def test_an_author_id_beyond_the_database_range_is_400_not_500(
    client: httpx.AsyncClient, manager: dict[str, Any], author_id: int
) -> None:
    article = await create(client, manager["headers"])
    url = f"{BASE}/{article['id']}"
    full = article_body(slug=article["slug"], author_id=author_id)
    for method, path, body in (
        ("POST", BASE, article_body(author_id=author_id)),
        ("PUT", url, full),
        ("PATCH", url, {"author_id": author_id}),
    ):
        response = await client.request(method, path, json=body, headers=manager["headers"])
        assert response.status_code == 400, (method, response.text)
        assert response.json()["error"]["code"] == "validation_error"


@pytest.mark.parametrize("tag", ["a\\ud800b", "\\udfff"])
async def test_a_lone_surrogate_in_a_tag_is_400_not_500(
    client: httpx.AsyncClient, manager: dict[str, Any], tag: str
) -> None:
    article = await create(client, manager["headers"])
    headers = {**manager["headers"], "content-type": "application/json"}
    tags = f'"tags": ["{tag}"]'.encode()
    for method, path, body in (
        ("POST", BASE, b'{"title": "Surrogates", ' + tags + b"}"),
        ("PATCH", f"{BASE}/{article['id']}", b"{" + tags + b"}"),
    ):
        response = await client.request(method, path, content=body, headers=headers)
        assert response.status_code == 400, (method, response.text)
        assert response.json()["error"]["code"] == "validation_error"


async def test_filters_by_status_author_and_creation_date(
    client: httpx.AsyncClient, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    author = await make_user(db_engine, "manager")
    headers = bearer_for(service_settings, author, "manager")
    draft = await create(client, headers, status="draft")
    published = await create(client, headers, status="published")
    mine = (await client.get(f"{BASE}?author_id={author}&per_page=100", headers=headers)).json()[
        "data"
    ]
    assert {a["id"] for a in mine} == {draft["id"], published["id"]}
    drafts = (await client.get(f"{BASE}?author_id={author}&status=draft", headers=headers)).json()[
        "data"
    ]
    assert [a["id"] for a in drafts] == [draft["id"]]
    async with db_engine.begin() as conn:
        await conn.execute(
            text("UPDATE articles SET created_at = '2020-01-01' WHERE id = :id"),
            {"id": draft["id"]},
        )
    recent = (
        await client.get(f"{BASE}?author_id={author}&created_after=2024-06-30", headers=headers)
    ).json()["data"]
    assert [a["id"] for a in recent] == [published["id"]]


@pytest.mark.parametrize(
    "query",
    [
        "created_after=2024-13-01",
        "created_after=yesterday",
        "sort=password",
        "order=up",
        "include=author,secrets",
        "status=gone",
        "per_page=0",
        "per_page=101",
        "page=abc",
    ],
)
async def test_bad_list_parameters_are_400(
    client: httpx.AsyncClient, manager: dict[str, Any], query: str
) -> None:
    response = await client.get(f"{BASE}?{query}", headers=manager["headers"])
    assert response.status_code == 400
    assert set(response.json()["error"]) >= {"code", "message"}


async def test_sort_and_order(
    client: httpx.AsyncClient, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    author = await make_user(db_engine, "manager")
    headers = bearer_for(service_settings, author, "manager")
    for title in ("Banana", "Apple", "Cherry"):
        await create(client, headers, title=f"{title} {author}")
    titles = [
        a["title"].split()[0]
        for a in (
            await client.get(f"{BASE}?author_id={author}&sort=title&order=desc", headers=headers)
        ).json()["data"]
    ]
    assert titles == ["Cherry", "Banana", "Apple"]


async def test_include_loads_relations_without_n_plus_one_queries(
    service_settings: Settings, db_engine: AsyncEngine
) -> None:
    author = await make_user(db_engine, "manager", name="Lin")
    headers = bearer_for(service_settings, author, "manager")
    app = create_app(service_settings)
    async with serve_app(app) as http:
        for n in range(8):
            created = await create(http, headers, tags=[f"t{n}", "common"])
            await http.post(
                f"{BASE}/{created['id']}/comments", json={"body": "hi"}, headers=headers
            )
        statements: list[str] = []

        def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
            if statement.lstrip().upper().startswith("SELECT"):
                statements.append(statement)

        engine = app.state.runtime.engine.sync_engine
        event.listen(engine, "before_cursor_execute", count)
        try:
            page = await http.get(
                f"{BASE}?author_id={author}&include=author,tags,comments&per_page=8",
                headers=headers,
            )
        finally:
            event.remove(engine, "before_cursor_execute", count)
    data = page.json()["data"]
    assert len(data) == 8
    assert all(a["author"]["name"] == "Lin" and len(a["comments"]) == 1 for a in data)
    # count + page + one query per relation, and auth's look-up of the token's user (the rate
    # limiter touches no SQL here).
    assert len(statements) <= 6


async def test_offset_paging_meta_and_links(
    client: httpx.AsyncClient, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    author = await make_user(db_engine, "manager")
    headers = bearer_for(service_settings, author, "manager")
    for _ in range(5):
        await create(client, headers)
    body = (
        await client.get(f"{BASE}?author_id={author}&per_page=2&page=2", headers=headers)
    ).json()
    assert len(body["data"]) == 2
    meta = body["meta"]
    assert (meta["total"], meta["page"], meta["per_page"]) == (5, 2, 2)
    assert "page=1" in meta["links"]["prev"]
    assert "page=3" in meta["links"]["next"]
    assert "page=3" in meta["links"]["last"]
    default = (await client.get(f"{BASE}?author_id={author}", headers=headers)).json()["meta"]
    assert default["per_page"] == 20


async def test_keyset_paging_is_stable_under_inserts(
    client: httpx.AsyncClient, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    author = await make_user(db_engine, "manager")
    headers = bearer_for(service_settings, author, "manager")
    created = [await create(client, headers) for _ in range(5)]
    first = (await client.get(f"{BASE}?author_id={author}&limit=2", headers=headers)).json()
    seen = [a["id"] for a in first["data"]]
    # Someone inserts while we page: offset paging would shift; keyset paging does not.
    await create(client, headers)
    cursor = first["meta"]["next_after_id"]
    while cursor is not None:
        page = (
            await client.get(
                f"{BASE}?author_id={author}&limit=2&after_id={cursor}", headers=headers
            )
        ).json()
        seen += [a["id"] for a in page["data"]]
        cursor = page["meta"]["next_after_id"]
    assert seen[:5] == [a["id"] for a in created]
    assert len(seen) == len(set(seen)) == 6


async def test_keyset_and_offset_paging_do_not_mix(
    client: httpx.AsyncClient, manager: dict[str, Any]
) -> None:
    response = await client.get(f"{BASE}?after_id=1&page=2", headers=manager["headers"])
    assert response.status_code == 400


async def test_v2_is_served_when_accept_asks_for_it(
    client: httpx.AsyncClient, manager: dict[str, Any]
) -> None:
    article = await create(client, manager["headers"], body="Body text", tags=["a", "b"])
    response = await client.get(
        f"{BASE}/{article['id']}",
        headers={**manager["headers"], "Accept": "application/vnd.commerce.v2+json"},
    )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/vnd.commerce.v2+json")
    data = response.json()["data"]
    assert data["content"] == "Body text"
    assert "body" not in data
    assert "author_id" not in data
    assert data["author"]["id"] == manager["id"]
    assert data["tags"] == ["a", "b"]


async def test_an_unknown_version_is_406(
    client: httpx.AsyncClient, manager: dict[str, Any]
) -> None:
    response = await client.get(
        BASE, headers={**manager["headers"], "Accept": "application/vnd.commerce.v9+json"}
    )
    assert response.status_code == 406
    assert response.json()["error"]["code"] == "not_acceptable"


async def test_comments_are_listed_and_added(
    client: httpx.AsyncClient,
    manager: dict[str, Any],
    db_engine: AsyncEngine,
    service_settings: Settings,
) -> None:
    article = await create(client, manager["headers"])
    reader = await make_user(db_engine, "user")
    added = await client.post(
        f"{BASE}/{article['id']}/comments",
        json={"body": "Nice!"},
        headers=bearer_for(service_settings, reader, "user"),
    )
    assert added.status_code == 201
    listed = (
        await client.get(f"{BASE}/{article['id']}/comments", headers=manager["headers"])
    ).json()
    assert [c["body"] for c in listed["data"]] == ["Nice!"]
    assert listed["meta"] == {"total": 1}
    missing = await client.get(f"{BASE}/999999/comments", headers=manager["headers"])
    assert missing.status_code == 404


async def test_article_changes_are_recorded_as_events(
    client: httpx.AsyncClient, manager: dict[str, Any], db_engine: AsyncEngine
) -> None:
    article = await create(client, manager["headers"])
    await client.patch(f"{BASE}/{article['id']}", json={"title": "T2"}, headers=manager["headers"])
    await client.delete(f"{BASE}/{article['id']}", headers=manager["headers"])
    async with db_engine.connect() as conn:
        types = (
            (
                await conn.execute(
                    # Other events' ids are UUIDs: compared as text, never cast.
                    text(
                        "SELECT type FROM outbox_events WHERE type LIKE 'article.%'"
                        " AND data->>'id' = :id ORDER BY seq"
                    ),
                    {"id": str(article["id"])},
                )
            )
            .scalars()
            .all()
        )
    assert types == ["article.created", "article.updated", "article.deleted"]


@pytest.fixture
async def limited_client(service_settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    settings = service_settings.model_copy(update={"rate_limit": "3/minute"})
    async with serve_app(create_app(settings)) as http:
        yield http


async def test_rate_limit_answers_429_with_retry_after(
    limited_client: httpx.AsyncClient, manager: dict[str, Any]
) -> None:
    statuses = [
        (await limited_client.get(BASE, headers=manager["headers"])).status_code for _ in range(4)
    ]
    assert statuses == [200, 200, 200, 429]
    limited = await limited_client.get(BASE, headers=manager["headers"])
    assert limited.json()["error"]["code"] == "rate_limited"
    assert 1 <= int(limited.headers["retry-after"]) <= 60
