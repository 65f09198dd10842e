"""Request headers a client may not set on requests a service sends on its behalf: framing and
connection headers (request smuggling, a wrong Host), proxy credentials, headers that make a
request look internal to a proxy, and the headers cloud metadata services demand (so a request
that did reach one would still be refused by it)."""

from __future__ import annotations

FORBIDDEN_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "upgrade",
        "te",
        "trailer",
        "expect",
        "proxy-authorization",
        "proxy-authenticate",
        "proxy-connection",
        "forwarded",
        "x-real-ip",
        "x-http-method-override",
        "metadata",
        "metadata-flavor",
        "x-google-metadata-request",
        "x-identity-header",
        "x-idms-token",
    }
)
FORBIDDEN_PREFIXES = ("x-forwarded-", "x-aws-ec2-metadata-token", "x-envoy-")


def refused_header(name: str) -> str | None:
    """Why a header name may not be set by a client, or None."""
    lowered = name.lower()
    if lowered in FORBIDDEN_HEADERS or lowered.startswith(FORBIDDEN_PREFIXES):
        return f"header {name!r} may not be set (transport, proxy or metadata header)"
    return None
