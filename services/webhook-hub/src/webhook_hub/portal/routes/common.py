"""What the portal's page modules share: the prefix, the level checks, the subscription a page
is about (loaded and authorised once, as a dependency), the way back to an endpoint's page, a
settings form's save, and the delivery log's time filter."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Form
from fastapi.responses import RedirectResponse, Response
from servicekit.auth.api_keys import AccessLevel
from servicekit.auth.dependencies import Principal
from servicekit.web.pages import Pages, PagesDep, PageSession, PageSessionDep

from webhook_hub.errors import NeedsLevel
from webhook_hub.models import Subscription
from webhook_hub.portal.forms import parse_local_time
from webhook_hub.portal.snippets import receiver_snippets
from webhook_hub.subscriptions.dependencies import SubscriptionServiceDep
from webhook_hub.subscriptions.schemas import SubscriptionUpdate
from webhook_hub.subscriptions.service import SubscriptionService

PREFIX = "/portal"
FormText = Annotated[str, Form()]

Refusal = TypeVar("Refusal", bound=Exception)


def principal(session: PageSession) -> Principal:
    return Principal(owner=session.owner, level=session.level)


def require(session: PageSession, level: AccessLevel) -> None:
    if not session.can(level):
        raise NeedsLevel(f"This needs the '{level.value}' access level; you have '{session.level}'")


async def own_subscription(
    session: PageSessionDep, service: SubscriptionServiceDep, subscription_id: uuid.UUID
) -> Subscription:
    """The subscription a page shows: the session owner's (another owner's id: 404)."""
    return await service.get(session.owner, subscription_id)


async def writable_subscription(
    session: PageSessionDep, service: SubscriptionServiceDep, subscription_id: uuid.UUID
) -> Subscription:
    """The subscription a page changes: the write level first (403), then the owner's
    subscription (404), in the API's order."""
    require(session, AccessLevel.WRITE)
    return await service.get(session.owner, subscription_id)


OwnSubscription = Annotated[Subscription, Depends(own_subscription)]
WritableSubscription = Annotated[Subscription, Depends(writable_subscription)]


def back_to(subscription_id: uuid.UUID) -> Response:
    return RedirectResponse(f"{PREFIX}/endpoints/{subscription_id}", status_code=303)


def back_with(
    pages: Pages, subscription_id: uuid.UUID, message: str, kind: str = "success"
) -> Response:
    """Back to the endpoint's page, `message` flashed."""
    response = back_to(subscription_id)
    pages.flash(response, message, kind)
    return response


@dataclass(frozen=True)
class SettingsSave:
    """A settings form's save on the page's subscription, as a PATCH of the fields the form
    names (so the API's checks)."""

    pages: Pages
    owner: str
    service: SubscriptionService
    subscription: Subscription

    async def __call__(
        self, body: Callable[[], Any], refusals: tuple[type[Refusal], ...], message: str
    ) -> Response | Refusal:
        """Saved: the way back to the endpoint's page, `message` flashed; or refused: the
        refusal, for the form to come back with its errors."""
        try:
            patch = SubscriptionUpdate.model_validate(body())
            await self.service.update(self.owner, self.subscription.id, patch)
        except refusals as exc:
            return exc
        return back_with(self.pages, self.subscription.id, message)


async def settings_save(
    pages: PagesDep,
    session: PageSessionDep,
    service: SubscriptionServiceDep,
    subscription: WritableSubscription,
) -> SettingsSave:
    return SettingsSave(pages, session.owner, service, subscription)


SettingsSaveDep = Annotated[SettingsSave, Depends(settings_save)]


def time_window(
    created_from: str, created_to: str
) -> tuple[tuple[datetime | None, datetime | None], dict[str, str]]:
    """The log's time filter from its two datetime-local inputs (UTC); a value that is not a
    date and time is left out of the filter and told at its input."""
    window: list[datetime | None] = []
    errors: dict[str, str] = {}
    for name, text in (("from", created_from), ("to", created_to)):
        moment = parse_local_time(text) if text else None
        if text and moment is None:
            errors[name] = "Use a date and time such as 2026-11-22T10:00."
        window.append(moment)
    if window[0] and window[1] and window[1] <= window[0]:
        errors["to"] = "Pick a moment after the start of the range."
    return (window[0], window[1]), errors


def snippets(endpoint_url: str, subscription_id: uuid.UUID, secret: str | None) -> Any:
    return receiver_snippets(endpoint_url, str(subscription_id), secret)
