"""Global object ids and connection cursors: both opaque base64 text to clients.

A global id names its type so `node(id:)` can find any object (Relay's Global Object
Identification); a cursor carries the keyset position of an edge.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from functools import lru_cache


class InvalidIdentifier(ValueError):
    """Text that is not an id or cursor this API issued."""


MAX_KEY = 2**31 - 1  # database ids are Postgres `integer`s


def integer(text: str) -> int:
    """A non-negative database id, or `InvalidIdentifier`. ASCII digits only: "²" passes
    str.isdigit but not int()."""
    if not _ascii_digits(text) or len(text) > 10 or int(text) > MAX_KEY:
        raise InvalidIdentifier(text)
    return int(text)


def _ascii_digits(text: str) -> bool:
    return text.isascii() and text.isdigit()


def _encode(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _decode(value: str) -> str:
    try:
        padded = value + "=" * (-len(value) % 4)
        return base64.urlsafe_b64decode(padded.encode("ascii")).decode()
    except (binascii.Error, UnicodeError, ValueError) as exc:
        raise InvalidIdentifier(value) from exc


@dataclass(frozen=True)
class GlobalId:
    type_name: str
    key: str

    def __str__(self) -> str:
        return global_id(self.type_name, self.key)

    @classmethod
    def parse(cls, value: str) -> GlobalId:
        type_name, sep, key = _decode(value).partition(":")
        if not sep or not type_name or not key:
            raise InvalidIdentifier(value)
        return cls(type_name, key)

    def integer_key(self) -> int:
        return integer(self.key)


# Ids and cursors of recently answered objects, kept: a storefront asks for the same pages
# over and over, and a page of products has ~250 of them to encode.
IDS_KEPT = 32_768


@lru_cache(maxsize=IDS_KEPT)
def global_id(type_name: str, key: object) -> str:
    return _encode(f"{type_name}:{key}")


def decode_id(value: str, expected_type: str) -> int:
    """The integer key of a global id of `expected_type`; `InvalidIdentifier` otherwise."""
    parsed = GlobalId.parse(value)
    if parsed.type_name != expected_type:
        raise InvalidIdentifier(value)
    return parsed.integer_key()


CURSOR_PREFIX = "cursor:v1:"


@lru_cache(maxsize=IDS_KEPT)
def encode_cursor(position: int) -> str:
    return _encode(f"{CURSOR_PREFIX}{position}")


def decode_cursor(cursor: str) -> int:
    text = _decode(cursor)
    if not text.startswith(CURSOR_PREFIX):
        raise InvalidIdentifier(cursor)
    return integer(text.removeprefix(CURSOR_PREFIX))


def category_key(value: str) -> int:
    """Categories have no type in the schema: a database id, or a global id of type Category."""
    if _ascii_digits(value):
        return integer(value)
    return decode_id(value, "Category")
