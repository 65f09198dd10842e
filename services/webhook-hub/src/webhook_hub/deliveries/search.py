"""The delivery log's search box: an event id finds that event's delivery, any other text is
looked for in the payloads. Total: any text in, a search or none out."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from servicekit.db.like import contains_pattern

# The most deliveries one page of a payload search reads (newest first, inside the filter and
# past the page's cursor): `payload::text ILIKE` has no index, so a page's cost is bounded by
# this, not by the log's size. The next page goes on past them.
PAYLOAD_SCAN_LIMIT = 10_000
# Longer text than this is no search a person types.
MAX_SEARCH_CHARS = 200


@dataclass(frozen=True)
class LogSearch:
    event_id: uuid.UUID | None = None
    payload_text: str | None = None

    def like_pattern(self) -> str | None:
        """The ILIKE pattern for the payload text, its wildcards escaped (`\\` escapes)."""
        if self.payload_text is None:
            return None
        return contains_pattern(self.payload_text)


def parse_log_search(text: str) -> LogSearch | None:
    """None for an empty box; an id-shaped text (any UUID spelling) is an event id; anything
    else, trimmed and cut at MAX_SEARCH_CHARS, is payload text."""
    stripped = text.strip()[:MAX_SEARCH_CHARS]
    if not stripped:
        return None
    try:
        return LogSearch(event_id=uuid.UUID(stripped))
    except ValueError:
        return LogSearch(payload_text=stripped)
