"""Crawled bytes to text that PostgreSQL stores: a charset only when it is a real text encoding
(a server may name `unicode_escape`, which turns escapes into NULs and lone surrogates), and
every stored string without NUL and with lone surrogates replaced."""

from __future__ import annotations

import codecs
import re
from typing import Any

# Codecs that interpret escapes or are not encodings of text at all.
_REFUSED_CODECS = frozenset(
    {"unicode_escape", "raw_unicode_escape", "escape_codec", "punycode", "idna", "utf_7"}
)
_SURROGATE = re.compile("[\ud800-\udfff]")


def text_encoding(charset: str | None) -> str:
    """The declared charset when it is a plain text encoding, else UTF-8."""
    if not charset:
        return "utf-8"
    try:
        info = codecs.lookup(charset)
    except LookupError:
        return "utf-8"
    name = info.name.replace("-", "_")
    if name in _REFUSED_CODECS or not getattr(info, "_is_text_encoding", True):
        return "utf-8"
    return info.name


def decode(raw: bytes, charset: str | None) -> str:
    return clean_text(raw.decode(text_encoding(charset), errors="replace"))


def clean_text(text: str) -> str:
    """No NUL (PostgreSQL refuses it in text and jsonb), no lone surrogate (not UTF-8)."""
    if "\x00" in text:
        text = text.replace("\x00", "")
    return _SURROGATE.sub("\ufffd", text)


def clean_value(value: Any) -> Any:
    """`clean_text` through an item's JSON-like value."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, list):
        return [clean_value(v) for v in value]
    if isinstance(value, dict):
        return {clean_text(str(k)): clean_value(v) for k, v in value.items()}
    return value
