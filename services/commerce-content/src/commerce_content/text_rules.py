"""Which characters free text may hold where it reaches mail headers or PostgreSQL (the
contact form, checkout's e-mail and address): a pure decision."""

from __future__ import annotations

import unicodedata

# Control characters (C0, DEL, C1), line and paragraph separators, and lone surrogates: a name
# or address with one of these could add headers to the notification mail ("\r\nBcc: ..."),
# and PostgreSQL refuses NUL.
_REFUSED_CATEGORIES = frozenset({"Cc", "Zl", "Zp", "Cs"})
# The message is a body: its line breaks and tabs are text.
MESSAGE_WHITESPACE = frozenset("\t\n\r")


def has_control_characters(value: str, allowed: frozenset[str] = frozenset()) -> bool:
    return any(
        unicodedata.category(char) in _REFUSED_CATEGORIES and char not in allowed for char in value
    )
