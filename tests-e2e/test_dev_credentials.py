"""`make run` hands a person every credential the READMEs use (issue 14, defect 5): each
service's admin key, the content API key and a JWT per role, printed and working."""

from __future__ import annotations

import httpx
import pytest
from conftest import CONTENT_API_KEY, Stack

ROLES = ("admin", "manager", "user", "guest")


def shop(stack: Stack) -> str:
    return stack.services["commerce-content"].url


def dev_tokens(stack: Stack) -> dict[str, str]:
    minted = stack.summary["services"]["commerce-content"]["tokens"]
    return {role: minted[role]["token"] for role in ROLES}


def test_the_content_api_key_and_a_jwt_per_role_are_printed(stack: Stack) -> None:
    printed = stack.output.read_text(errors="replace")
    assert f"content API key (X-API-Key): {CONTENT_API_KEY}" in printed
    for role, token in dev_tokens(stack).items():
        assert f"dev JWT, {role} " in printed
        assert token in printed


def test_the_printed_content_api_key_opens_the_content_api(stack: Stack) -> None:
    key = stack.summary["services"]["commerce-content"]["content_api_key"]
    answer = httpx.get(f"{shop(stack)}/api/products/", headers={"X-API-Key": key})
    assert answer.status_code == 200
    assert answer.json()["total"] >= 0


@pytest.mark.parametrize("role", ROLES)
def test_each_printed_jwt_is_accepted_by_the_resource_api(stack: Stack, role: str) -> None:
    token = dev_tokens(stack)[role]
    answer = httpx.get(
        f"{shop(stack)}/api/v1/articles", headers={"Authorization": f"Bearer {token}"}
    )
    assert answer.status_code == 200


@pytest.mark.parametrize(("role", "status"), [("admin", 200), ("manager", 403), ("user", 403)])
def test_each_printed_jwt_carries_its_role(stack: Stack, role: str, status: int) -> None:
    token = dev_tokens(stack)[role]
    answer = httpx.post(
        f"{shop(stack)}/api/admin-action",
        headers={"Authorization": f"Bearer {token}"},
        json={"action": "check-dev-token"},
    )
    assert answer.status_code == status
