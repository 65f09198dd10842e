"""Representation versions: `/api/v1` serves v1 unless `Accept` asks for
`application/vnd.commerce.v2+json`; an unknown version is 406. The response's Content-Type
names the version served."""

from __future__ import annotations

import re
from typing import Any

from fastapi import Request

from commerce_content.errors import UnknownVersion

SUPPORTED_VERSIONS = (1, 2)
_VENDOR = re.compile(r"application/vnd\.commerce\.v(\d+)\+json")


def negotiate_version(request: Request) -> int:
    asked = [int(v) for v in _VENDOR.findall(request.headers.get("accept", ""))]
    if not asked:
        return 1
    for version in asked:
        if version in SUPPORTED_VERSIONS:
            return version
    raise UnknownVersion(
        f"Version {asked[0]} is not served; supported: "
        + ", ".join(f"application/vnd.commerce.v{v}+json" for v in SUPPORTED_VERSIONS)
    )


def media_type(version: int) -> str:
    return f"application/vnd.commerce.v{version}+json"


def versioned_content(
    schema_name: str, status: int = 200, example: Any = None
) -> dict[int | str, dict[str, Any]]:
    """OpenAPI: the success body is served as each vendor media type, same schema; `example`
    (the v1 body) is shown for each of them and for plain JSON."""
    schema: dict[str, Any] = {"schema": {"$ref": f"#/components/schemas/{schema_name}"}}
    if example is not None:
        schema["example"] = example
    content = {media_type(v): schema for v in SUPPORTED_VERSIONS}
    if example is not None:
        content["application/json"] = {"example": example}
    return {status: {"content": content}}
