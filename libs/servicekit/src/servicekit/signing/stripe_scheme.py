"""Stripe's webhook scheme: `Stripe-Signature: t=<ts>,v1=<hex HMAC-SHA256 of "t.body">`.

Used for incoming payment notifications so that Stripe itself, the `stripe` SDK and our
sandbox provider all interoperate with one verifier.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Sequence

from servicekit.signing.standard import SignatureError

STRIPE_TOLERANCE_SECONDS = 300


def _hex_signature(secret: str, timestamp: int, payload: bytes) -> str:
    signed = f"{timestamp}.".encode() + payload
    return hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def sign_stripe(payload: bytes, secrets_: Sequence[str] | str, timestamp: int | None = None) -> str:
    """A `Stripe-Signature` header value with one `v1` entry per secret."""
    ts = int(time.time()) if timestamp is None else timestamp
    secret_list = [secrets_] if isinstance(secrets_, str) else list(secrets_)
    parts = [f"t={ts}"] + [f"v1={_hex_signature(s, ts, payload)}" for s in secret_list]
    return ",".join(parts)


def verify_stripe(
    payload: bytes,
    header: str | None,
    secret: str,
    *,
    tolerance: int = STRIPE_TOLERANCE_SECONDS,
    now: float | None = None,
) -> int:
    """Raise SignatureError unless a `v1` entry matches; returns the signed timestamp."""
    if not header:
        raise SignatureError("missing Stripe-Signature header")
    timestamp: int | None = None
    candidates: list[str] = []
    for item in header.split(","):
        key, sep, value = item.strip().partition("=")
        if not sep:
            continue
        if key == "t":
            try:
                timestamp = int(value)
            except ValueError as exc:
                raise SignatureError("signature timestamp is not an integer") from exc
        elif key == "v1":
            candidates.append(value)
    if timestamp is None or not candidates:
        raise SignatureError("signature header has no timestamp or no v1 signature")
    expected = _hex_signature(secret, timestamp, payload)
    if not any(hmac.compare_digest(expected, c) for c in candidates):
        raise SignatureError("no signature matches the payload")
    current = time.time() if now is None else now
    # Both ways: a timestamp from the future would keep a captured notification replayable
    # for as long as it lies ahead (Stripe's SDK checks only the past).
    if tolerance > 0 and abs(current - timestamp) > tolerance:
        raise SignatureError("signature timestamp is outside the tolerance")
    return timestamp
