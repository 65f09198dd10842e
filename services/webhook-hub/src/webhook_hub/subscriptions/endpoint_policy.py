"""What an endpoint may be: an absolute http(s) URL that, in production, does not resolve into
our own network (SSRF), with custom headers that cannot forge the signature or the transport."""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
import time
from collections.abc import Iterable
from urllib.parse import urlsplit

MAX_URL_LENGTH = 2048
MAX_HEADERS = 50
MAX_HEADER_VALUE = 4096
RESERVED_HEADERS = frozenset({"content-type", "host", "content-length", "user-agent"})
RESERVED_PREFIXES = ("webhook-",)
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,128}$")
# Cloud metadata services, refused even where link-local might be allowed.
METADATA_ADDRESSES = frozenset(
    {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}
)
_RESOLVE_CACHE_SECONDS = 60.0


class EndpointRefused(ValueError):
    """The endpoint may not be used."""


def check_url_form(url: str) -> str:
    if len(url) > MAX_URL_LENGTH:
        raise EndpointRefused(f"endpoint_url is longer than {MAX_URL_LENGTH} characters")
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"}:
        raise EndpointRefused("endpoint_url must be an absolute http or https URL")
    if not parts.hostname:
        raise EndpointRefused("endpoint_url has no host")
    if parts.username or parts.password:
        raise EndpointRefused("endpoint_url must not carry credentials; use headers")
    try:
        _ = parts.port
    except ValueError as exc:
        raise EndpointRefused("endpoint_url has an invalid port") from exc
    if any(ch.isspace() for ch in url):
        raise EndpointRefused("endpoint_url must not contain white space")
    return url


def check_headers(headers: dict[str, str]) -> dict[str, str]:
    if len(headers) > MAX_HEADERS:
        raise EndpointRefused(f"at most {MAX_HEADERS} custom headers")
    for name, value in headers.items():
        lowered = name.lower()
        if not _TOKEN.match(name):
            raise EndpointRefused(f"header name {name!r} is not a valid HTTP token")
        if lowered in RESERVED_HEADERS or lowered.startswith(RESERVED_PREFIXES):
            raise EndpointRefused(f"header {name!r} is set by webhook-hub and cannot be overridden")
        if len(value) > MAX_HEADER_VALUE or any(ch in value for ch in "\r\n\x00"):
            raise EndpointRefused(f"header {name!r} has an invalid value")
    return headers


def _forbidden(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return (
        address in METADATA_ADDRESSES
        or address.is_loopback
        or address.is_private
        or address.is_link_local
        or address.is_multicast
        or address.is_reserved
        or address.is_unspecified
    )


class EndpointGuard:
    """Resolves an endpoint's host and refuses private destinations (cached briefly, since
    it also runs before every delivery: DNS can change after creation)."""

    def __init__(self, allowed_networks: Iterable[str] = ()) -> None:
        self.allowed = [ipaddress.ip_network(net, strict=False) for net in allowed_networks]
        self._cache: dict[tuple[str, int], tuple[float, list[str]]] = {}

    def _allowed(self, address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
        return any(address in network for network in self.allowed)

    async def resolve(self, host: str, port: int) -> list[str]:
        key = (host, port)
        cached = self._cache.get(key)
        if cached and time.monotonic() - cached[0] < _RESOLVE_CACHE_SECONDS:
            return cached[1]
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        addresses = sorted({str(info[4][0]) for info in infos})
        self._cache[key] = (time.monotonic(), addresses)
        return addresses

    async def check(self, url: str) -> None:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            addresses = await self.resolve(host, port)
        except OSError as exc:
            raise EndpointRefused(f"the host {host!r} does not resolve") from exc
        for raw in addresses:
            address = ipaddress.ip_address(raw.split("%")[0])
            if _forbidden(address) and not self._allowed(address):
                raise EndpointRefused(
                    f"endpoint_url resolves to {address}, a private or reserved address"
                )
