"""Opaque keyset cursors over (created_at, id), newest first."""

from __future__ import annotations

import base64
import json
import uuid
from datetime import datetime

from servicekit.web.errors import BadRequest

MAX_PAGE_SIZE = 100
DEFAULT_PAGE_SIZE = 20


def encode_cursor(created_at: datetime, row_id: uuid.UUID) -> str:
    raw = json.dumps([created_at.isoformat(), str(row_id)]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, uuid.UUID]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        created, row_id = json.loads(base64.urlsafe_b64decode(padded.encode()))
        return datetime.fromisoformat(created), uuid.UUID(row_id)
    except (ValueError, TypeError) as exc:
        raise BadRequest("cursor is not one this API returned") from exc
