"""API keys with levels and owners, the FastAPI dependency that checks them, and HS256 JWTs."""

from servicekit.auth.api_keys import AccessLevel, generate_api_key, hash_api_key
from servicekit.auth.dependencies import Principal, require_level
from servicekit.auth.jwt import InvalidToken, JWTCodec

__all__ = [
    "AccessLevel",
    "InvalidToken",
    "JWTCodec",
    "Principal",
    "generate_api_key",
    "hash_api_key",
    "require_level",
]
