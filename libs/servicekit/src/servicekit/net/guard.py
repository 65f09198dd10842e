"""The address policy enforced where connections are made, for aiohttp clients.

A host name is resolved once, by `GuardedResolver`; if any answer is refused the host is
refused, otherwise aiohttp connects to exactly the addresses that were checked (it never looks
the name up again), so a DNS answer that changes between check and connect (rebinding) cannot
slip through. The connector's socket factory checks the address once more right before
`connect()`: that also covers hosts given as IP literals, which aiohttp does not resolve, and
every redirect hop, since each hop is a new connection through the same connector.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

from servicekit.net.addresses import (
    AddressPolicy,
    AddressRefused,
    IPAddress,
    host_address,
    url_host,
)


class UnresolvedHost(AddressRefused):
    """A host name that did not resolve (or not in time): nothing could be checked."""


class GuardedResolver(AbstractResolver):
    """Resolves with `inner` (the system resolver by default) and refuses a host any of whose
    addresses the policy refuses."""

    def __init__(self, policy: AddressPolicy, inner: AbstractResolver | None = None) -> None:
        self.policy = policy
        self.inner = inner if inner is not None else DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        answers = await self.inner.resolve(host, port, family)
        for answer in answers:
            try:
                self.policy.check_text(answer["host"])
            except AddressRefused as exc:
                raise AddressRefused(f"{host} resolves to {exc}") from None
        return answers

    async def close(self) -> None:
        await self.inner.close()


def _socket_factory(policy: AddressPolicy) -> Any:
    def create(addr_info: Any) -> socket.socket:
        family, kind, proto, _, sockaddr = addr_info
        policy.check_text(str(sockaddr[0]))
        return socket.socket(family, kind, proto)

    return create


def guarded_connector(
    policy: AddressPolicy, *, resolver: AbstractResolver | None = None, **options: Any
) -> aiohttp.TCPConnector:
    """A TCPConnector that connects only where `policy` allows (other options as usual)."""
    return aiohttp.TCPConnector(
        resolver=GuardedResolver(policy, resolver),
        socket_factory=_socket_factory(policy),
        **options,
    )


def refusal_of(exc: BaseException) -> AddressRefused | None:
    """The policy's refusal behind an aiohttp connection error, if that is what it was."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, AddressRefused):
            return current
        seen.add(id(current))
        inner = getattr(current, "os_error", None)
        if isinstance(inner, AddressRefused):
            return inner
        current = current.__cause__ or current.__context__
    return None


async def resolve_checked(
    url: str,
    policy: AddressPolicy,
    *,
    resolver: AbstractResolver | None = None,
    timeout: float = 5.0,
) -> IPAddress:
    """The address a URL's host stands for, checked: an address host as written, a host name
    resolved once. Refused (`AddressRefused`) when the policy refuses it and also when the
    name does not resolve or the lookup times out, since then nothing was checked."""
    host, port = url_host(url)
    try:
        address = host_address(host)
    except ValueError as exc:
        raise AddressRefused(str(exc)) from None
    if address is not None:
        policy.check(address)
        return address
    guarded = GuardedResolver(policy, resolver)
    try:
        answers = await asyncio.wait_for(guarded.resolve(host, port, socket.AF_UNSPEC), timeout)
    except AddressRefused:
        raise
    except (OSError, TimeoutError):
        raise UnresolvedHost(f"{host} does not resolve from here") from None
    finally:
        if resolver is None:
            # Ours, made for this one look-up (with aiodns installed it holds a channel).
            await guarded.close()
    if not answers:
        raise UnresolvedHost(f"{host} does not resolve from here")
    return policy.check_text(answers[0]["host"])


async def check_url(
    url: str,
    policy: AddressPolicy,
    *,
    resolver: AbstractResolver | None = None,
    timeout: float = 5.0,
) -> None:
    """Before storing a URL: refuse an address host the policy refuses, and a host name that
    resolves to one. A name that does not resolve (yet) is accepted here and judged where the
    request is made (`guarded_connector`, or `proxy_target`, which refuses it)."""
    with contextlib.suppress(UnresolvedHost):
        await resolve_checked(url, policy, resolver=resolver, timeout=timeout)


@dataclass(frozen=True)
class ProxyTarget:
    """What to hand a forward proxy for a URL: the URL to request and, when its host was
    replaced by the checked address, the Host header that keeps the original name."""

    url: str
    host_header: str | None = None


def pinned_http_url(url: str, address: IPAddress) -> ProxyTarget:
    """`url` with its host replaced by the checked `address` and the original name kept in
    Host, for a plain http request through a proxy: the proxy then has no name to resolve
    again (rebinding), nor a legacy spelling (`0x7f.1`) to read its own way. https URLs are
    left as they are: the proxy's CONNECT must carry the name for TLS (SNI, certificate)."""
    parts = urlsplit(url)
    shown = f"[{address}]" if address.version == 6 else str(address)
    if parts.scheme != "http" or parts.hostname == shown.strip("[]"):
        return ProxyTarget(url)
    port = f":{parts.port}" if parts.port is not None else ""
    credentials, _, host_header = parts.netloc.rpartition("@")
    netloc = (f"{credentials}@" if credentials else "") + shown + port
    return ProxyTarget(urlunsplit(parts._replace(netloc=netloc)), host_header)


async def proxy_target(
    url: str,
    policy: AddressPolicy,
    *,
    resolver: AbstractResolver | None = None,
    timeout: float = 5.0,
) -> ProxyTarget:
    """A URL about to go through a forward proxy, which makes the connection itself: the host
    must resolve here to an address the policy allows (an internal-only name the proxy could
    resolve and we cannot is refused), and a plain http request is sent for that address."""
    address = await resolve_checked(url, policy, resolver=resolver, timeout=timeout)
    return pinned_http_url(url, address)
