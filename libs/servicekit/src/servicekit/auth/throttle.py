"""Failed sign-ins counted per client address: past `limit` failures within `window_seconds`,
the address waits until its oldest failure leaves the window (a sliding log, as fail2ban and
Django's axes count). Only failures count, so a person who signs in is never slowed down.

In memory, per process: each API process counts on its own (N processes let N times the
limit through), which bounds guessing well enough for 256-bit keys; the memory is bounded by
`max_clients` addresses of at most `limit` timestamps each. Pure: the caller passes the time."""

from __future__ import annotations

import ipaddress
from collections import deque

DEFAULT_LIMIT = 10
DEFAULT_WINDOW_SECONDS = 60.0
DEFAULT_MAX_CLIENTS = 10_000
# One IPv6 host usually holds a whole /64: its addresses count as one client.
IPV6_CLIENT_PREFIX = 64


def client_key(host: str | None) -> str:
    """The address failures are counted against: an IPv4 address as it is, an IPv6 address
    by its /64, anything else (no address, a test client's name) as its text."""
    if not host:
        return "-"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host[:100]
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, IPV6_CLIENT_PREFIX), strict=False))
    return str(address)


class FailureLimiter:
    def __init__(
        self,
        limit: int = DEFAULT_LIMIT,
        window_seconds: float = DEFAULT_WINDOW_SECONDS,
        *,
        max_clients: int = DEFAULT_MAX_CLIENTS,
    ) -> None:
        if limit < 1 or window_seconds <= 0 or max_clients < 1:
            raise ValueError("limit, window and max_clients must be positive")
        self.limit = limit
        self.window_seconds = window_seconds
        self.max_clients = max_clients
        # Insertion-ordered: the first entries are the clients that failed least recently.
        self._failures: dict[str, deque[float]] = {}

    def retry_after(self, client: str, now: float) -> float | None:
        """Seconds `client` must wait before trying again, or None if it may try now."""
        failures = self._recent(client, now)
        if failures is None or len(failures) < self.limit:
            return None
        return max(failures[0] + self.window_seconds - now, 0.001)

    def record_failure(self, client: str, now: float) -> None:
        failures = self._recent(client, now)
        if failures is None:
            if len(self._failures) >= self.max_clients:
                self._make_room(now)
            failures = self._failures[client] = deque(maxlen=self.limit)
        else:
            # Most recent failure last: moved to the end of the eviction order.
            self._failures[client] = self._failures.pop(client)
        failures.append(now)

    def tracked_clients(self) -> int:
        return len(self._failures)

    def _recent(self, client: str, now: float) -> deque[float] | None:
        failures = self._failures.get(client)
        if failures is None:
            return None
        while failures and failures[0] <= now - self.window_seconds:
            failures.popleft()
        if not failures:
            del self._failures[client]
            return None
        return failures

    def _make_room(self, now: float) -> None:
        """Forget the clients whose failures all left the window, then, if still full, the
        client that failed least recently. The order is that of the last failure, so both are
        found at the front."""
        stale = []
        for client, failures in self._failures.items():
            if failures[-1] > now - self.window_seconds:
                break
            stale.append(client)
        for client in stale:
            del self._failures[client]
        while len(self._failures) >= self.max_clients:
            del self._failures[next(iter(self._failures))]
