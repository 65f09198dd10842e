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
import socket
from typing import Any

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

from servicekit.net.addresses import AddressPolicy, AddressRefused, host_address, url_host


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


async def check_url(
    url: str,
    policy: AddressPolicy,
    *,
    resolver: AbstractResolver | None = None,
    timeout: float = 5.0,
) -> None:
    """Before storing a URL: refuse an address host the policy refuses, and a host name that
    resolves to one. A name that does not resolve (yet) is left to the connect-time check."""
    host, port = url_host(url)
    try:
        address = host_address(host)
    except ValueError as exc:
        raise AddressRefused(str(exc)) from None
    if address is not None:
        policy.check(address)
        return
    guarded = GuardedResolver(policy, resolver)
    try:
        await asyncio.wait_for(guarded.resolve(host, port, socket.AF_UNSPEC), timeout)
    except AddressRefused:
        raise
    except (OSError, TimeoutError):
        return
