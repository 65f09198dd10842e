"""schemathesis over the GraphQL schema (issue 13, must show): queries and mutations built from
the schema, with NUL characters in string arguments; no 5xx and no INTERNAL_SERVER_ERROR."""

from __future__ import annotations

import asyncio
from typing import Any

import schemathesis
from commerce_content.app import create_app
from commerce_content.settings import Settings
from hypothesis import strategies as st
from schemathesis.graphql import nodes
from servicekit.testing import run_http_server
from servicekit.testing.fuzz import examples_per_operation, exercise_operations, fuzz_randomly

NUL = "\x00"
# The schema's own scalars, as strings: well formed, malformed, huge, and with a NUL.
schemathesis.graphql.scalar(
    "Decimal",
    st.sampled_from(["19.90", "0", "-1", "NaN", "Infinity", "1e1000000", "1e30", "x", NUL]).map(
        nodes.String
    ),
)
schemathesis.graphql.scalar(
    "CurrencyCode", st.sampled_from(["USD", "EUR", "usd", "XX", "U" + NUL]).map(nodes.String)
)
schemathesis.graphql.scalar(
    "DateTime",
    st.sampled_from(["2026-01-01T00:00:00+00:00", "2026-13-01", "", NUL]).map(nodes.String),
)


def internal_errors(response: Any) -> list[str]:
    try:
        body = response.json()
    except ValueError:
        return []
    errors = body.get("errors") or [] if isinstance(body, dict) else []
    return [
        str(error.get("message"))
        for error in errors
        if (error.get("extensions") or {}).get("code") == "INTERNAL_SERVER_ERROR"
    ]


def fuzz_graphql(url: str, headers: dict[str, str]) -> tuple[int, list[str]]:
    schema = schemathesis.graphql.from_url(url, headers=headers)

    def check(case: Any) -> None:
        # Not schemathesis's own GraphQL check: it counts every error carrying a `path` as
        # the server's, the schema's deliberate RATE_LIMITED and FORBIDDEN answers included.
        response = case.call(headers=headers, timeout=30)
        assert response.status_code < 500, f"{case.body}: {response.status_code}"
        assert not internal_errors(response), f"{case.body}: {internal_errors(response)}"

    return exercise_operations(
        schema, check, examples=examples_per_operation(), derandomize=not fuzz_randomly()
    )


async def test_graphql_fuzz_finds_no_server_error(
    fuzz_settings: Settings, fuzz_headers: dict[str, str]
) -> None:
    headers = {"Authorization": fuzz_headers["Authorization"]}
    async with run_http_server(create_app(fuzz_settings)) as url:
        operations, findings = await asyncio.to_thread(fuzz_graphql, f"{url}/graphql", headers)
    assert operations > 5
    assert not findings, "\n\n".join(findings)
