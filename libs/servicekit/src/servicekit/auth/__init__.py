"""API keys with levels and owners, and HS256 JWTs. Framework-free: the FastAPI dependency
that checks keys is `servicekit.auth.dependencies`, their routes `servicekit.auth.endpoints`."""

from servicekit.auth.api_keys import AccessLevel, generate_api_key, hash_api_key
from servicekit.auth.jwt import InvalidToken, JWTCodec

__all__ = [
    "AccessLevel",
    "InvalidToken",
    "JWTCodec",
    "generate_api_key",
    "hash_api_key",
]
