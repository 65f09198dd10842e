"""Outbound network safety shared by the services: which addresses and headers a request made
on a user's behalf may have (SSRF), and an aiohttp connector that enforces it."""

from servicekit.net.addresses import (
    METADATA_ADDRESSES,
    AddressPolicy,
    AddressRefused,
    embedded_ipv4,
    host_address,
    literal_refusal,
    url_host,
)
from servicekit.net.guard import (
    GuardedResolver,
    ProxyTarget,
    UnresolvedHost,
    check_url,
    guarded_connector,
    pinned_http_url,
    proxy_target,
    refusal_of,
    resolve_checked,
)
from servicekit.net.headers import FORBIDDEN_HEADERS, refused_header

__all__ = [
    "FORBIDDEN_HEADERS",
    "METADATA_ADDRESSES",
    "AddressPolicy",
    "AddressRefused",
    "GuardedResolver",
    "ProxyTarget",
    "UnresolvedHost",
    "check_url",
    "embedded_ipv4",
    "guarded_connector",
    "host_address",
    "literal_refusal",
    "pinned_http_url",
    "proxy_target",
    "refusal_of",
    "refused_header",
    "resolve_checked",
    "url_host",
]
