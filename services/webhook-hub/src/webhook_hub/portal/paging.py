"""The delivery log's Previous and Next links. Keyset pages only know the way on, so the way
back is carried in the address: each Next link adds the page it leaves to `back`, and
Previous takes the last one off. Only the last MAX_BACK are kept (a cursor is about 100
characters): further back than that, "First page" is the way."""

from __future__ import annotations

from dataclasses import dataclass

MAX_BACK = 10
# As the pages' own `cursor` parameter: a longer value is no cursor of ours.
MAX_CURSOR_CHARS = 500
# The first page has no cursor; in `back` it is the empty value.
FIRST = ""


@dataclass(frozen=True)
class PageLink:
    cursor: str | None
    back: list[str]


@dataclass(frozen=True)
class PageLinks:
    previous: PageLink | None
    next: PageLink | None
    on_first: bool


def page_links(cursor: str | None, back: list[str], next_cursor: str | None) -> PageLinks:
    """The links of the page at `cursor` (None: the first), reached through `back`."""
    kept = [entry for entry in back if len(entry) <= MAX_CURSOR_CHARS][-MAX_BACK:]
    here = cursor or FIRST
    following = (
        PageLink(next_cursor, [*kept, here][-MAX_BACK:]) if next_cursor is not None else None
    )
    previous = None
    if here != FIRST and kept:
        previous = PageLink(kept[-1] or None, kept[:-1])
    return PageLinks(previous=previous, next=following, on_first=here == FIRST)
