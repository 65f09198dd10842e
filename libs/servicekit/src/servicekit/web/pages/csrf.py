"""CSRF: a signed double-submit token. A random nonce lives in an HttpOnly cookie; forms carry
`csrf_token` and htmx requests the `X-CSRF-Token` header (set once on <body> with hx-headers),
both HMAC(secret, nonce). Every non-GET page request must bring it, and an `Origin` header,
when sent, must be this host. A cookie planted by a sibling domain is useless without the
secret, and no other site can read the token from the page."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from urllib.parse import urlsplit

from pydantic import SecretStr

from servicekit.errors import Forbidden

CSRF_FIELD = "csrf_token"
CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_MAX_NONCE = 64


class CsrfRefused(Forbidden):
    code = "csrf_failed"
    default_message = (
        "This form has expired or was not sent from this site: reload the page and try again"
    )


class CsrfTokens:
    def __init__(self, secret: SecretStr) -> None:
        self._key = hashlib.sha256(
            b"servicekit.csrf|" + secret.get_secret_value().encode()
        ).digest()

    @staticmethod
    def new_nonce() -> str:
        return secrets.token_urlsafe(32)

    def token_for(self, nonce: str) -> str:
        mac = hmac.new(self._key, nonce.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac).decode().rstrip("=")

    def verify(self, nonce: str | None, sent: str | None) -> bool:
        if not nonce or not sent or len(nonce) > _MAX_NONCE:
            return False
        return hmac.compare_digest(self.token_for(nonce), sent)


def same_origin(origin: str | None, host: str | None) -> bool:
    """No Origin (older clients, some same-origin GET-to-POST redirects) is decided by the
    token alone; a sent Origin must name this host."""
    if origin is None:
        return True
    return host is not None and urlsplit(origin).netloc == host
