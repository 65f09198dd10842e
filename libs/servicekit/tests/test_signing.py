from __future__ import annotations

import base64
import hmac
import json
import time

import pytest
import stripe
from servicekit.signing import (
    SignatureError,
    generate_secret,
    sign_stripe,
    sign_webhook,
    verify_stripe,
    verify_webhook,
    webhook_headers,
)
from servicekit.signing.standard import hmac_sha256
from standardwebhooks import Webhook, WebhookVerificationError

BODY = json.dumps({"type": "order.paid", "timestamp": "2026-11-22T10:00:00Z", "data": {}}).encode()


def test_generated_secret_is_32_characters_of_base64_for_24_bytes() -> None:
    secret = generate_secret()
    assert len(secret) == 32
    assert len(base64.b64decode(secret)) == 24
    assert generate_secret() != secret


@pytest.mark.parametrize("key_length", [0, 1, 24, 63, 64, 65, 200])
def test_our_hmac_sha256_is_the_standard_librarys_for_keys_of_any_length(key_length: int) -> None:
    key = bytes(range(256))[:key_length]
    for message in (b"", b"x", BODY, BODY * 40):
        assert hmac_sha256(key, message) == hmac.digest(key, message, "sha256")


def test_each_signature_with_a_secret_starts_from_its_untouched_states() -> None:
    secret = generate_secret()
    key = base64.b64decode(secret)
    for message_id in ("msg_1", "msg_2", "msg_1"):  # the secret's states are made once
        expected = hmac.digest(key, f"{message_id}.1700000000.".encode() + BODY, "sha256")
        signature = sign_webhook(message_id, 1700000000, BODY, [secret])
        assert signature == "v1," + base64.b64encode(expected).decode()


def test_standardwebhooks_verifies_our_signature() -> None:
    secret = generate_secret()
    headers = webhook_headers("msg_1", BODY, [secret])
    assert Webhook(secret).verify(BODY, headers) == json.loads(BODY)


def test_standardwebhooks_accepts_the_secret_with_whsec_prefix() -> None:
    secret = generate_secret()
    headers = webhook_headers("msg_1", BODY, [secret])
    Webhook("whsec_" + secret).verify(BODY, headers)


def test_during_rotation_a_receiver_holding_either_secret_verifies() -> None:
    new, old = generate_secret(), generate_secret()
    headers = webhook_headers("msg_2", BODY, [new, old])
    assert headers["webhook-signature"].count("v1,") == 2
    Webhook(new).verify(BODY, headers)
    Webhook(old).verify(BODY, headers)


def test_after_rotation_only_the_new_secret_verifies() -> None:
    new, old = generate_secret(), generate_secret()
    headers = webhook_headers("msg_3", BODY, [new])
    Webhook(new).verify(BODY, headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(old).verify(BODY, headers)


def test_tampered_body_fails_verification() -> None:
    secret = generate_secret()
    headers = webhook_headers("msg_4", BODY, [secret])
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(BODY + b" ", headers)
    with pytest.raises(SignatureError):
        verify_webhook(headers, BODY + b" ", [secret])


def test_stale_timestamp_fails_verification() -> None:
    secret = generate_secret()
    headers = webhook_headers("msg_5", BODY, [secret], timestamp=int(time.time()) - 3600)
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(BODY, headers)
    with pytest.raises(SignatureError, match="tolerance"):
        verify_webhook(headers, BODY, [secret])


def test_wrong_secret_fails_verification() -> None:
    headers = webhook_headers("msg_6", BODY, [generate_secret()])
    with pytest.raises(SignatureError, match="no signature matches"):
        verify_webhook(headers, BODY, [generate_secret()])


def test_our_verifier_tries_new_then_old_secret() -> None:
    new, old = generate_secret(), generate_secret()
    signed_with_old_only = webhook_headers("msg_7", BODY, [old])
    verify_webhook(signed_with_old_only, BODY, [new, old])


def test_missing_headers_fail_verification() -> None:
    with pytest.raises(SignatureError, match="missing"):
        verify_webhook({}, BODY, [generate_secret()])


STRIPE_SECRET = "whsec_test_0123456789abcdef"


def test_stripe_sdk_verifies_our_stripe_scheme_signature() -> None:
    header = sign_stripe(BODY, STRIPE_SECRET)
    assert stripe.WebhookSignature.verify_header(BODY.decode(), header, STRIPE_SECRET, 300)


def test_our_verifier_accepts_a_signature_made_by_the_stripe_scheme() -> None:
    timestamp = int(time.time())
    header = sign_stripe(BODY, STRIPE_SECRET, timestamp=timestamp)
    assert verify_stripe(BODY, header, STRIPE_SECRET) == timestamp


def test_stripe_scheme_accepts_any_of_several_v1_entries() -> None:
    header = sign_stripe(BODY, ["whsec_other_secret", STRIPE_SECRET])
    assert header.count("v1=") == 2
    verify_stripe(BODY, header, STRIPE_SECRET)
    assert stripe.WebhookSignature.verify_header(BODY.decode(), header, STRIPE_SECRET, 300)


def test_stripe_scheme_refuses_a_tampered_body() -> None:
    header = sign_stripe(BODY, STRIPE_SECRET)
    with pytest.raises(SignatureError):
        verify_stripe(BODY + b"x", header, STRIPE_SECRET)
    with pytest.raises(stripe.SignatureVerificationError):
        stripe.WebhookSignature.verify_header(BODY.decode() + "x", header, STRIPE_SECRET, 300)


def test_stripe_scheme_refuses_a_stale_timestamp() -> None:
    header = sign_stripe(BODY, STRIPE_SECRET, timestamp=int(time.time()) - 301)
    with pytest.raises(SignatureError, match="tolerance"):
        verify_stripe(BODY, header, STRIPE_SECRET)
    with pytest.raises(stripe.SignatureVerificationError):
        stripe.WebhookSignature.verify_header(BODY.decode(), header, STRIPE_SECRET, 300)


def test_stripe_scheme_refuses_a_timestamp_too_far_in_the_future() -> None:
    now = time.time()
    header = sign_stripe(BODY, STRIPE_SECRET, timestamp=int(now) + 10 * 86400)
    with pytest.raises(SignatureError, match="tolerance"):
        verify_stripe(BODY, header, STRIPE_SECRET, now=now)
    just_outside = sign_stripe(BODY, STRIPE_SECRET, timestamp=int(now) + 301)
    with pytest.raises(SignatureError, match="tolerance"):
        verify_stripe(BODY, just_outside, STRIPE_SECRET, now=now)


def test_stripe_scheme_accepts_clock_skew_within_the_tolerance_both_ways() -> None:
    now = float(int(time.time()))
    for skew in (-300, 300):
        header = sign_stripe(BODY, STRIPE_SECRET, timestamp=int(now) + skew)
        assert verify_stripe(BODY, header, STRIPE_SECRET, now=now) == int(now) + skew


def test_stripe_scheme_refuses_the_wrong_secret() -> None:
    header = sign_stripe(BODY, "whsec_someone_else")
    with pytest.raises(SignatureError):
        verify_stripe(BODY, header, STRIPE_SECRET)


@pytest.mark.parametrize("header", [None, "", "garbage", "t=abc,v1=00", "t=123"])
def test_stripe_scheme_refuses_missing_or_malformed_headers(header: str | None) -> None:
    with pytest.raises(SignatureError):
        verify_stripe(BODY, header, STRIPE_SECRET)
