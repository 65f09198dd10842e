"""Is the endpoint reachable? Any HTTP answer counts; the result never blocks creation. The
session it is given connects through the endpoint guard (see dependencies)."""

from __future__ import annotations

import aiohttp
from servicekit.net import refusal_of

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
            # aiohttp's own text of a refused connect hides the policy's reason.
            refused = refusal_of(exc)
            error = f"refused: {refused}" if refused is not None else str(exc)
            return Probe(reachable=False, error=error or type(exc).__name__)
