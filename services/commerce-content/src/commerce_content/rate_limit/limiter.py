"""Per-client rate limits with the `limits` library: in memory by default, or a shared store
(`memcached://`, `redis://`, ...) when several replicas must count together."""

from __future__ import annotations

import hashlib
import math
import time

from fastapi import Request
from limits import parse
from limits.aio.storage import Storage
from limits.aio.strategies import MovingWindowRateLimiter
from limits.storage import storage_from_string
from servicekit.web.errors import RateLimited


def async_storage(storage_url: str) -> Storage:
    # The async variant of any scheme is named `async+<scheme>`.
    url = storage_url if storage_url.startswith("async+") else f"async+{storage_url}"
    storage = storage_from_string(url)
    assert isinstance(storage, Storage)
    return storage


class RequestLimiter:
    def __init__(self, rule: str, storage_url: str) -> None:
        self.limit = parse(rule)
        self.limiter = MovingWindowRateLimiter(async_storage(storage_url))

    async def check(self, key: str) -> None:
        if await self.limiter.hit(self.limit, key):
            return
        stats = await self.limiter.get_window_stats(self.limit, key)
        retry_after = max(1, math.ceil(stats.reset_time - time.time()))
        raise RateLimited(
            f"Rate limit of {self.limit} exceeded; retry in {retry_after} s",
            headers={"Retry-After": str(retry_after)},
        )


def client_key(request: Request) -> str:
    """The credential if there is one (so a key is limited wherever it comes from), else the
    client address."""
    authorization = request.headers.get("authorization", "")
    if authorization:
        return "auth:" + hashlib.sha256(authorization.encode()).hexdigest()[:32]
    host = request.client.host if request.client else "unknown"
    return f"ip:{host}"


async def enforce_rate_limit(request: Request) -> None:
    limiter: RequestLimiter = request.app.state.request_limiter
    await limiter.check(client_key(request))
