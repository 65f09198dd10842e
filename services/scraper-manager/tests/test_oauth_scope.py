"""Which scope a client-credentials grant gives: a pure decision, no database."""

import pytest
from scraper_manager.oauth.service import OAuthRefusal, granted_scope
from servicekit.auth.api_keys import AccessLevel


def test_a_client_asking_for_no_scope_gets_its_own_level() -> None:
    assert granted_scope(AccessLevel.WRITE, None) == AccessLevel.WRITE
    assert granted_scope(AccessLevel.WRITE, "") == AccessLevel.WRITE


def test_a_client_may_ask_for_less_than_its_level() -> None:
    assert granted_scope(AccessLevel.ADMIN, "read") == AccessLevel.READ


def test_the_highest_scope_asked_for_is_granted() -> None:
    assert granted_scope(AccessLevel.ADMIN, "read write") == AccessLevel.WRITE


def test_a_scope_above_the_clients_level_is_refused() -> None:
    with pytest.raises(OAuthRefusal) as refused:
        granted_scope(AccessLevel.READ, "write")
    assert (refused.value.status, refused.value.error) == (400, "invalid_scope")


@pytest.mark.parametrize("asked", ["delete", "read operator", "READ"])
def test_an_unknown_scope_is_refused(asked: str) -> None:
    with pytest.raises(OAuthRefusal) as refused:
        granted_scope(AccessLevel.ADMIN, asked)
    assert refused.value.error == "invalid_scope"
