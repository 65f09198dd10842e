"""The portal's pages about one subscription load and authorise it once, in a dependency
(`portal/routes/common.py`): a page that changes it checks the write level before the owner,
as the API does, so a read session learns nothing of whose ids exist."""

from __future__ import annotations

import httpx
from servicekit.testing import HttpReceiver
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.factories import make_consumer, signed_in, subscribe

WRITABLE_PAGES = ("edit", "expressions")
WRITABLE_POSTS = (
    "edit",
    "rate-limit",
    "ordering",
    "test",
    "example",
    "retries",
    "expressions",
    "expressions/preview",
)


async def test_a_read_session_is_refused_the_level_even_on_another_owners_endpoint(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    owner = await make_consumer(db_engine, "write")
    theirs = await subscribe(client, owner.headers, http_receiver.url)
    token = await signed_in(client, await make_consumer(db_engine, "read"))
    base = f"/portal/endpoints/{theirs['id']}"
    for page in WRITABLE_PAGES:
        assert (await client.get(f"{base}/{page}")).status_code == 403, page
    for action in WRITABLE_POSTS:
        answer = await client.post(f"{base}/{action}", data={"csrf_token": token})
        assert answer.status_code == 403, action


async def test_a_write_session_finds_no_other_owners_endpoint_to_change(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    owner = await make_consumer(db_engine, "write")
    theirs = await subscribe(client, owner.headers, http_receiver.url)
    token = await signed_in(client, await make_consumer(db_engine, "write"))
    base = f"/portal/endpoints/{theirs['id']}"
    for page in (*WRITABLE_PAGES, "retries"):
        assert (await client.get(f"{base}/{page}")).status_code == 404, page
    for action in WRITABLE_POSTS:
        answer = await client.post(f"{base}/{action}", data={"csrf_token": token})
        assert answer.status_code == 404, action
