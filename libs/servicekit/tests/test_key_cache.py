"""A process remembers the keys it found active for `API_KEY_CACHE_SECONDS`; a key revoked
or changed in this process is looked up again at once (servicekit.auth.key_cache)."""

from __future__ import annotations

import uuid

from servicekit.auth import AccessLevel
from servicekit.auth.dependencies import Principal
from servicekit.auth.key_cache import ApiKeyCache


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def principal(owner: str = "initech") -> Principal:
    return Principal(owner=owner, level=AccessLevel.ADMIN, key_id=uuid.uuid4())


def test_a_key_is_remembered_for_its_seconds_and_then_read_again() -> None:
    clock = Clock()
    cache = ApiKeyCache(5, clock=clock)
    alice = principal()
    cache.put("hash-a", alice)
    clock.now += 4.9
    assert cache.get("hash-a") == alice
    clock.now += 0.2
    assert cache.get("hash-a") is None


def test_a_key_never_found_is_not_remembered() -> None:
    assert ApiKeyCache(5).get("hash-unknown") is None


def test_a_forgotten_key_is_read_again_and_a_lookup_from_before_cannot_put_it_back() -> None:
    clock = Clock()
    cache = ApiKeyCache(5, clock=clock)
    alice = principal()
    cache.put("hash-a", alice)
    cache.forget(alice.key_id)  # type: ignore[arg-type]
    assert cache.get("hash-a") is None
    # A request that read the row just before the revocation committed.
    cache.put("hash-a", alice)
    assert cache.get("hash-a") is None
    clock.now += 5.1  # past any entry read before the change: remembered again
    cache.put("hash-a", alice)
    assert cache.get("hash-a") == alice


def test_forgetting_a_key_leaves_the_owners_other_keys_remembered() -> None:
    cache = ApiKeyCache(5)
    first, second = principal(), principal()
    cache.put("hash-1", first)
    cache.put("hash-2", second)
    cache.forget(first.key_id)  # type: ignore[arg-type]
    assert cache.get("hash-2") == second


def test_a_full_cache_starts_again_rather_than_grow() -> None:
    cache = ApiKeyCache(5, max_keys=2)
    one, two, three = principal(), principal(), principal()
    cache.put("hash-1", one)
    cache.put("hash-2", two)
    cache.put("hash-3", three)
    assert (cache.get("hash-1"), cache.get("hash-2"), cache.get("hash-3")) == (None, None, three)
