"""Content-saved notifications: `{event, id, alias, published}` POSTed as JSON to the
configured address, signed (Standard Webhooks), 3 s timeout, after the response, never
raising to the caller. Nothing is sent when no address is configured."""

from __future__ import annotations

import json
import uuid

import httpx
import structlog
from servicekit.signing import webhook_headers

from commerce_content.settings import Settings

logger = structlog.get_logger(__name__)
TIMEOUT_SECONDS = 3.0


async def notify_content_saved(
    settings: Settings, event: str, item_id: int, alias: str, published: bool
) -> None:
    if not settings.content_webhook_url:
        return
    body = json.dumps(
        {"event": event, "id": item_id, "alias": alias, "published": published}
    ).encode()
    headers = {
        "content-type": "application/json",
        **webhook_headers(
            f"msg_{uuid.uuid4().hex}", body, [settings.content_webhook_secret.get_secret_value()]
        ),
    }
    try:
        async with httpx.AsyncClient(timeout=TIMEOUT_SECONDS) as http:
            response = await http.post(settings.content_webhook_url, content=body, headers=headers)
        if response.status_code >= 300:
            logger.warning("content webhook answered", status=response.status_code)
    except httpx.HTTPError as exc:
        logger.warning("content webhook failed", error=repr(exc))
