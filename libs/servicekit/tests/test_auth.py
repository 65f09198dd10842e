from __future__ import annotations

import time

import pytest
from joserfc import jwt
from joserfc.jwk import OctKey
from servicekit.auth import AccessLevel, InvalidToken, JWTCodec, generate_api_key, hash_api_key
from servicekit.auth.api_keys import display_prefix, key_matches

JWT_SECRET = "test-jwt-secret-with-enough-entropy-0123456789"


def test_api_key_has_the_recognisable_prefix_and_high_entropy() -> None:
    key = generate_api_key("whk")
    assert key.startswith("whk_")
    assert len(key) >= 40
    assert generate_api_key("whk") != key


def test_api_key_is_stored_as_sha256_hex_and_matches_only_itself() -> None:
    key = generate_api_key("smk")
    stored = hash_api_key(key)
    assert len(stored) == 64
    assert key not in stored
    assert key_matches(key, stored)
    assert not key_matches(key + "x", stored)


def test_display_prefix_does_not_reveal_the_key() -> None:
    key = generate_api_key("cck")
    assert len(display_prefix(key)) == 12
    assert key.startswith(display_prefix(key))


@pytest.mark.parametrize(
    ("held", "required", "allowed"),
    [
        (AccessLevel.READ, AccessLevel.READ, True),
        (AccessLevel.READ, AccessLevel.WRITE, False),
        (AccessLevel.WRITE, AccessLevel.READ, True),
        (AccessLevel.WRITE, AccessLevel.ADMIN, False),
        (AccessLevel.ADMIN, AccessLevel.WRITE, True),
        (AccessLevel.ADMIN, AccessLevel.ADMIN, True),
        (AccessLevel.ADMIN, AccessLevel.OPERATOR, False),
        (AccessLevel.OPERATOR, AccessLevel.ADMIN, True),
    ],
)
def test_levels_are_ordered_read_write_admin_operator(
    held: AccessLevel, required: AccessLevel, allowed: bool
) -> None:
    assert held.allows(required) is allowed


def test_the_api_cannot_issue_the_operator_level() -> None:
    from servicekit.auth.api_keys import ISSUED_OVER_API

    assert AccessLevel.OPERATOR not in ISSUED_OVER_API


def codec(**overrides: str) -> JWTCodec:
    options = {"secret": JWT_SECRET, "issuer": "commerce-content", "audience": "commerce-api"}
    options.update(overrides)
    return JWTCodec(options["secret"], issuer=options["issuer"], audience=options["audience"])


def test_issued_jwt_verifies_with_its_claims() -> None:
    token = codec().issue("user-42", {"role": "admin"})
    claims = codec().verify(token)
    assert claims["sub"] == "user-42"
    assert claims["role"] == "admin"
    assert claims["iss"] == "commerce-content"
    assert claims["aud"] == "commerce-api"


def test_expired_jwt_is_refused() -> None:
    token = codec().issue("user-42", ttl_seconds=60, now=int(time.time()) - 3600)
    with pytest.raises(InvalidToken):
        codec().verify(token)


def test_jwt_for_another_audience_is_refused() -> None:
    token = codec(audience="someone-else").issue("user-42")
    with pytest.raises(InvalidToken):
        codec().verify(token)


def test_jwt_from_another_issuer_is_refused() -> None:
    token = codec(issuer="evil").issue("user-42")
    with pytest.raises(InvalidToken):
        codec().verify(token)


def test_jwt_signed_with_another_secret_is_refused() -> None:
    token = codec(secret="another-secret-of-sufficient-length-000000").issue("user-42")
    with pytest.raises(InvalidToken):
        codec().verify(token)


def test_tampered_jwt_is_refused() -> None:
    header, payload, signature = codec().issue("user-42").split(".")
    with pytest.raises(InvalidToken):
        codec().verify(f"{header}.{payload}x.{signature}")


@pytest.mark.parametrize("garbage", ["", "abc", "a.b.c", "Bearer x"])
def test_malformed_jwt_is_refused(garbage: str) -> None:
    with pytest.raises(InvalidToken):
        codec().verify(garbage)


def test_unsigned_jwt_is_refused() -> None:
    import base64
    import json

    def b64(data: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")

    claims = {"sub": "x", "iss": "commerce-content", "aud": "commerce-api", "exp": 9999999999}
    token = f"{b64({'alg': 'none'})}.{b64(claims)}."
    with pytest.raises(InvalidToken):
        codec().verify(token)


def foreign_token(claims: dict[str, object]) -> str:
    """A token made by another HS256 library's user: just the claims given, no iss or aud."""
    return jwt.encode({"alg": "HS256"}, claims, OctKey.import_key(JWT_SECRET.encode()))


def test_without_issuer_and_audience_configured_a_token_with_sub_and_exp_verifies() -> None:
    now = int(time.time())
    token = foreign_token({"sub": "7", "iat": now, "exp": now + 60, "role": "admin"})
    claims = JWTCodec(JWT_SECRET).verify(token)
    assert claims["sub"] == "7"
    assert claims["role"] == "admin"


def test_without_issuer_and_audience_configured_exp_is_still_required() -> None:
    token = foreign_token({"sub": "7", "iat": int(time.time())})
    with pytest.raises(InvalidToken):
        JWTCodec(JWT_SECRET).verify(token)


def test_a_configured_issuer_and_audience_are_required_of_foreign_tokens() -> None:
    now = int(time.time())
    token = foreign_token({"sub": "7", "iat": now, "exp": now + 60})
    with pytest.raises(InvalidToken):
        codec().verify(token)


def test_without_issuer_and_audience_configured_issued_tokens_carry_neither() -> None:
    claims = JWTCodec(JWT_SECRET).verify(JWTCodec(JWT_SECRET).issue("7"))
    assert "iss" not in claims
    assert "aud" not in claims
