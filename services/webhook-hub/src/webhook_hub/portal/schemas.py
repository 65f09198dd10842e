"""Wire shapes of portal links."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field
from servicekit.web.pages.links import MAX_LINK_TTL_SECONDS, MIN_LINK_TTL_SECONDS

DEFAULT_TTL_SECONDS = 3600


class PortalLinkCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"ttl_seconds": 900}]}
    )

    ttl_seconds: int = Field(
        default=DEFAULT_TTL_SECONDS,
        ge=MIN_LINK_TTL_SECONDS,
        le=MAX_LINK_TTL_SECONDS,
        description="How long the link may be opened (once): 60 s to 24 h, default 1 h",
    )


class PortalLinkCreated(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "url": "https://hooks.example.com/portal/link/5mB0yQ...",
                    "expires_at": "2026-11-22T11:00:00Z",
                }
            ]
        }
    )

    url: str = Field(description="Opens a portal session for your owner at your key's level, once")
    expires_at: datetime
