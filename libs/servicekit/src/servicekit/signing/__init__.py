"""Webhook signatures: Standard Webhooks for what we send, the Stripe scheme for what we receive."""

from servicekit.signing.standard import (
    SignatureError,
    generate_secret,
    sign_webhook,
    verify_webhook,
    webhook_headers,
)
from servicekit.signing.stripe_scheme import sign_stripe, verify_stripe

__all__ = [
    "SignatureError",
    "generate_secret",
    "sign_stripe",
    "sign_webhook",
    "verify_stripe",
    "verify_webhook",
    "webhook_headers",
]
