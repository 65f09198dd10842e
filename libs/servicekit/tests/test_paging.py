"""Keyset paging: the page `limit + 1` rows make, and cursors the API alone can issue."""

import uuid
from datetime import UTC, datetime

import pytest
from servicekit.errors import InvalidCursor
from servicekit.paging import (
    decode_id_cursor,
    decode_time_id_cursor,
    encode_time_id_cursor,
    page_of,
)


def test_the_extra_row_only_says_another_page_exists() -> None:
    page = page_of([1, 2, 3], 2, str)
    assert page.items == [1, 2]
    assert page.next_cursor == "2"


def test_a_last_page_has_no_cursor() -> None:
    assert page_of([1, 2], 2, str).next_cursor is None
    assert page_of([], 2, str).items == []


def test_a_time_id_cursor_reads_back_as_the_row_it_names() -> None:
    at, row_id = datetime(2026, 11, 23, 12, 0, tzinfo=UTC), uuid.uuid4()
    assert decode_time_id_cursor(encode_time_id_cursor(at, row_id)) == (at, row_id)
    assert decode_time_id_cursor(None) is None


@pytest.mark.parametrize("cursor", ["", "abc", "W10", "WyJ4IiwgInkiXQ"])
def test_a_time_id_cursor_the_api_did_not_issue_is_refused(cursor: str) -> None:
    with pytest.raises(InvalidCursor) as raised:
        decode_time_id_cursor(cursor)
    assert raised.value.status_code == 400


def test_a_row_id_cursor_reads_as_its_id() -> None:
    assert decode_id_cursor("42") == 42
    assert decode_id_cursor(None) is None


@pytest.mark.parametrize(
    "cursor", ["", "-1", "a", "1.5", "²", "1²", "٣٣", "12345678901", "2147483648"]
)
def test_an_id_cursor_the_api_did_not_issue_is_refused(cursor: str) -> None:
    with pytest.raises(InvalidCursor):
        decode_id_cursor(cursor)


def test_a_refused_cursor_is_a_bad_request_named_for_what_it_is() -> None:
    with pytest.raises(InvalidCursor) as raised:
        decode_id_cursor("x")
    assert raised.value.code == "invalid_cursor"
    assert raised.value.status_code == 400
