"""Data for servicekit's tests."""

from __future__ import annotations

import uuid


def unique_event_type(resource: str = "probe") -> str:
    """A type no other test publishes, so each test reads only its own subject."""
    return f"{resource}{uuid.uuid4().hex[:10]}.happened"
