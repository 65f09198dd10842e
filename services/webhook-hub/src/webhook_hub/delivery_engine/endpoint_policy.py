"""What an endpoint may be: an absolute http(s) URL that, in production, does not resolve into
our own network (SSRF: servicekit.net's address policy, shared with the crawler), and in every
environment never to a cloud metadata or link-local address, with custom headers that cannot
forge the signature or the transport."""

from __future__ import annotations

import re
import socket
import time
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver
from servicekit.net import (
    AddressPolicy,
    AddressRefused,
    GuardedResolver,
    guarded_connector,
    host_address,
    literal_refusal,
    refused_header,
    url_host,
)

MAX_URL_LENGTH = 2048
MAX_HEADERS = 50
MAX_HEADER_VALUE = 4096
RESERVED_HEADERS = frozenset({"content-type", "host", "content-length", "user-agent"})
RESERVED_PREFIXES = ("webhook-",)
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,128}$")
_RESOLVE_CACHE_SECONDS = 60.0
# Endpoints whose check is remembered: enough for a busy minute of creations, bounded whatever
# the number of distinct endpoints ever seen (least recently checked forgotten first).
MAX_REMEMBERED_CHECKS = 4096


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
        port = parts.port
    except ValueError as exc:
        raise EndpointRefused("endpoint_url has an invalid port (1 to 65535)") from exc
    if port == 0:
        # Port 0 names no service (the sender would quietly use 80).
        raise EndpointRefused("endpoint_url has an invalid port (1 to 65535)")
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
        refused = refused_header(name)
        if refused is not None:
            raise EndpointRefused(refused)
        if len(value) > MAX_HEADER_VALUE or any(ch in value for ch in "\r\n\x00"):
            raise EndpointRefused(f"header {name!r} has an invalid value")
    return headers


class EndpointGuard:
    """servicekit's shared address policy for endpoints: checked when a subscription is stored
    (names resolved, cached briefly) and enforced again by `connector()` where each delivery
    connects, to the very address that was checked.

    `strict` (production): globally routable addresses only, besides `allowed_networks`, and a
    name must resolve. Otherwise (development): loopback and private networks are allowed and
    a name that does not resolve yet is accepted (judged where the request is made), but cloud
    metadata and link-local addresses are refused all the same."""

    def __init__(
        self,
        allowed_networks: Iterable[str] = (),
        *,
        strict: bool = True,
        resolver: AbstractResolver | None = None,
        max_remembered: int = MAX_REMEMBERED_CHECKS,
    ) -> None:
        self.policy = (
            AddressPolicy.allowing(allowed_networks) if strict else AddressPolicy.development()
        )
        self.strict = strict
        self._resolver = resolver
        self._max_remembered = max_remembered
        # URL -> when it passed; oldest first (an LRU with a time limit).
        self._checked: OrderedDict[str, float] = OrderedDict()

    @property
    def resolver(self) -> AbstractResolver | None:
        """The resolver names are looked up with (None: the system's)."""
        return self._resolver

    @property
    def remembered(self) -> int:
        """How many passed checks are remembered."""
        return len(self._checked)

    def connector(self, **options: Any) -> aiohttp.TCPConnector:
        return guarded_connector(self.policy, resolver=self._resolver, **options)

    async def check(self, url: str) -> None:
        checked = self._checked.get(url)
        if checked is not None:
            if time.monotonic() - checked < _RESOLVE_CACHE_SECONDS:
                self._checked.move_to_end(url)
                return
            del self._checked[url]
        host, port = url_host(url)
        try:
            literal = literal_refusal(url, self.policy)
            if literal is not None:
                raise AddressRefused(literal)
            if host_address(host) is None:
                resolver = GuardedResolver(self.policy, self._resolver)
                await resolver.resolve(host, port, socket.AF_UNSPEC)
        except AddressRefused as exc:
            raise EndpointRefused(f"endpoint_url is refused: {exc} (private or reserved)") from exc
        except OSError as exc:
            if self.strict:
                raise EndpointRefused(f"the host {host!r} does not resolve") from exc
            return  # not remembered: checked again next time, and at delivery
        self._checked[url] = time.monotonic()
        self._checked.move_to_end(url)
        while len(self._checked) > self._max_remembered:
            self._checked.popitem(last=False)
