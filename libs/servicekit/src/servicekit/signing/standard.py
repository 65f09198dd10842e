"""Standard Webhooks (https://www.standardwebhooks.com): HMAC-SHA256 over `id.timestamp.body`.

A secret is 32 characters: base64 of 24 random bytes. The HMAC key is those decoded bytes, as
the `standardwebhooks` package does, which also accepts the secret with a `whsec_` prefix.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import secrets
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from _hashlib import HASH

SECRET_BYTES = 24
SECRET_PREFIX = "whsec_"  # noqa: S105 (a marker, not a secret)
DEFAULT_TOLERANCE_SECONDS = 300


class SignatureError(ValueError):
    """A signature is missing, malformed, stale or made with another secret."""


def generate_secret() -> str:
    """32 characters: base64 of 24 random bytes (no padding needed at that length)."""
    return base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def _key(secret: str) -> bytes:
    raw = secret.removeprefix(SECRET_PREFIX)
    try:
        return base64.b64decode(raw, validate=True)
    except ValueError as exc:
        raise SignatureError("webhook secret is not base64") from exc


# SHA-256's block size: HMAC pads its key to it (RFC 2104).
_BLOCK = 64
_INNER_PAD = bytes(0x36 for _ in range(_BLOCK))
_OUTER_PAD = bytes(0x5C for _ in range(_BLOCK))


def _hmac_states(key: bytes) -> tuple[HASH, HASH]:
    """HMAC-SHA256's two hashes after the key's padded blocks (RFC 2104)."""
    if len(key) > _BLOCK:
        key = hashlib.sha256(key).digest()
    key = key.ljust(_BLOCK, b"\0")
    inner = hashlib.sha256(bytes(k ^ p for k, p in zip(key, _INNER_PAD, strict=True)))
    outer = hashlib.sha256(bytes(k ^ p for k, p in zip(key, _OUTER_PAD, strict=True)))
    return inner, outer


@functools.lru_cache(maxsize=4096)
def _secret_states(secret: str) -> tuple[HASH, HASH]:
    """Made once per secret: signing is on every delivery's path. Copying the states costs
    1.6 to 1.8 µs a message, against 2.4 to 4.1 for `hmac.digest`, which sets OpenSSL's HMAC
    up again on each call."""
    return _hmac_states(_key(secret))


def _hmac_from(states: tuple[HASH, HASH], message: bytes) -> bytes:
    inner = states[0].copy()
    inner.update(message)
    outer = states[1].copy()
    outer.update(inner.digest())
    return outer.digest()


def hmac_sha256(key: bytes, message: bytes) -> bytes:
    """`hmac.digest(key, message, "sha256")`, as the signatures compute it."""
    return _hmac_from(_hmac_states(key), message)


def _signature(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    signed = f"{msg_id}.{timestamp}.".encode() + body
    digest = _hmac_from(_secret_states(secret), signed)
    return binascii.b2a_base64(digest, newline=False).decode()


def sign_webhook(msg_id: str, timestamp: int, body: bytes, secrets_: Sequence[str]) -> str:
    """The `webhook-signature` value: one `v1,<sig>` per secret, space separated."""
    if not secrets_:
        raise ValueError("at least one secret is needed to sign")
    return " ".join(f"v1,{_signature(s, msg_id, timestamp, body)}" for s in secrets_)


def webhook_headers(
    msg_id: str, body: bytes, secrets_: Sequence[str], timestamp: int | None = None
) -> dict[str, str]:
    ts = int(time.time()) if timestamp is None else timestamp
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(ts),
        "webhook-signature": sign_webhook(msg_id, ts, body, secrets_),
    }


def verify_webhook(
    headers: Mapping[str, str],
    body: bytes,
    secrets_: Sequence[str],
    *,
    tolerance: int = DEFAULT_TOLERANCE_SECONDS,
    now: float | None = None,
) -> None:
    """Raise SignatureError unless one `v1` signature matches one secret, in time.

    Secrets are tried in the order given: the new secret first, then the old one during a
    rotation's transition.
    """
    lowered = {k.lower(): v for k, v in headers.items()}
    msg_id = lowered.get("webhook-id")
    raw_ts = lowered.get("webhook-timestamp")
    raw_sig = lowered.get("webhook-signature")
    if not msg_id or not raw_ts or not raw_sig:
        raise SignatureError("missing webhook-id, webhook-timestamp or webhook-signature")
    try:
        timestamp = int(raw_ts)
    except ValueError as exc:
        raise SignatureError("webhook-timestamp is not an integer") from exc
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance:
        raise SignatureError("webhook-timestamp is outside the tolerance")
    offered = [
        part.split(",", 1)[1] for part in raw_sig.split() if part.startswith("v1,") and "," in part
    ]
    for secret in secrets_:
        expected = _signature(secret, msg_id, timestamp, body)
        if any(hmac.compare_digest(expected, candidate) for candidate in offered):
            return
    raise SignatureError("no signature matches")
