"""Change notices: the keys they carry, read by a total function."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st
from servicekit.live import encode_keys, parse_keys


def test_a_notice_carries_each_key_once() -> None:
    ids = [uuid.uuid4() for _ in range(3)]
    assert parse_keys(encode_keys([*ids, ids[0], 42])) == {*map(str, ids), "42"}


def test_lines_that_are_not_keys_are_left_out() -> None:
    assert parse_keys(b"abc\n\n has space\n" + b"x" * 101 + b"\n<script>\n7") == {"abc", "7"}


def test_a_notice_that_is_not_ascii_names_no_key() -> None:
    assert parse_keys("abc\n²".encode()) == frozenset()


@given(st.binary(max_size=2000))
def test_any_bytes_give_a_set_of_keys_never_an_exception(data: bytes) -> None:
    keys = parse_keys(data)
    assert all(isinstance(key, str) and 0 < len(key) <= 100 for key in keys)
