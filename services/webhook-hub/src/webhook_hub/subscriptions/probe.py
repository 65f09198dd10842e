"""Is the endpoint reachable? Any HTTP answer counts; the result never blocks creation."""

from __future__ import annotations

import aiohttp

from webhook_hub.subscriptions.schemas import Probe


class EndpointProber:
    def __init__(self, http: aiohttp.ClientSession, timeout_seconds: float) -> None:
        self._http = http
        self._timeout = aiohttp.ClientTimeout(total=timeout_seconds)

    async def probe(self, url: str) -> Probe:
        try:
            async with self._http.head(
                url, timeout=self._timeout, allow_redirects=False
            ) as response:
                return Probe(reachable=True, status_code=response.status)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            return Probe(reachable=False, error=str(exc) or type(exc).__name__)
