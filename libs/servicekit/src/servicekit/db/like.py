"""Patterns for SQL `LIKE`/`ILIKE ... ESCAPE '\\'` built from a user's text: its `%`, `_` and
`\\` match themselves."""

from __future__ import annotations


def like_escaped(text: str) -> str:
    """`text` with LIKE's wildcards and the escape character escaped."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def contains_pattern(text: str) -> str:
    """The pattern of a value containing `text` anywhere: `%<text escaped>%`."""
    return f"%{like_escaped(text)}%"
