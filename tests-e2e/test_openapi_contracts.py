"""Bad input against every documented operation (schemathesis, from each service's
/openapi.json, authenticated): no 5xx, and every response is documented (status, content
type, body schema). A bounded number of examples per operation keeps it inside CI's time."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import schemathesis
from conftest import CONTENT_API_KEY, Stack
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from servicekit.testing.fuzz import exercise_operations

EXAMPLES_PER_OPERATION = 12
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
# Addresses the services would call or crawl: always the tests' own loopback receiver, so
# fuzzing never sends anything off this machine.
SINK: dict[str, str] = {}


@schemathesis.hook
def map_body(context: Any, body: Any) -> Any:
    if isinstance(body, dict):
        for field in ("endpoint_url", "url"):
            if isinstance(body.get(field), str) and SINK:
                body[field] = SINK["url"]
    return body


def auth_headers(stack: Stack, service: str) -> dict[str, str]:
    if service == "commerce-content":
        token = stack.shop.cli("tokens", "create", "--sub", "1", "--role", "admin")
        return {"Authorization": f"Bearer {token}", "X-API-Key": CONTENT_API_KEY}
    return {"Authorization": f"Bearer {stack.services[service].admin_key}"}


@pytest.mark.parametrize("service", ["webhook-hub", "scraper-manager", "commerce-content"])
def test_every_operation_answers_bad_input_as_documented(
    service: str, stack: Stack, shop_website: str
) -> None:
    SINK["url"] = shop_website
    info = stack.services[service]
    schema = schemathesis.openapi.from_url(f"{info.url}/openapi.json")
    headers = auth_headers(stack, service)

    def check(case: Any) -> None:
        case.call_and_validate(base_url=info.url, headers=headers, checks=CHECKS, timeout=30)

    try:
        operations, findings = exercise_operations(
            schema, check, examples=EXAMPLES_PER_OPERATION, derandomize=True
        )
    finally:
        if service == "webhook-hub":
            # The generated cases may have set the admin's delivery defaults (issue 32's
            # `PUT /webhooks/consumers/me/defaults`): the tests after this one rely on the
            # stack's fast retry schedule.
            reset = httpx.put(
                f"{info.url}/webhooks/consumers/me/defaults", json={}, headers=headers, timeout=30
            )
            assert reset.status_code == 200, reset.text
    assert operations > 5
    assert not findings, "\n\n".join(findings)
