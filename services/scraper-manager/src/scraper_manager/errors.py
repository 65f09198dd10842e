"""scraper-manager's errors: the servicekit kinds it raises, one class per thing a client can
run into, and the OpenAPI responses they generate. The spec leaves the body of errors open;
we use servicekit's flat envelope, as webhook-hub does, so a client of both parses one form:
`{"error": <text>, "code": <code>}`."""

from servicekit.errors import (
    Conflict,
    Forbidden,
    InvalidCursor,
    NotFound,
    ServiceUnavailable,
    Unauthorized,
    UnprocessableEntity,
)
from servicekit.web.errors import flat_error_responses


class LinkNeedsApiKey(Forbidden):
    code = "link_needs_api_key"
    default_message = (
        "Dashboard links are issued to API keys: a page session must end with the key that "
        "opened it, and an OAuth token has no key to end with. Ask with an API key."
    )


class ScraperNotFound(NotFound):
    default_message = "Scraper not found"


class RunNotFound(NotFound):
    default_message = "Run not found"


class ItemNotFound(NotFound):
    default_message = "Item not found"


class WebhookNotFound(NotFound):
    default_message = "Webhook not found"


class AlreadyRunning(Conflict):
    code = "already_running"
    default_message = "The scraper is already running"


class NotRunning(Conflict):
    code = "not_running"
    default_message = "The scraper is not running"


class ScraperLimitReached(Conflict):
    code = "scraper_limit_reached"
    default_message = "The client has as many scrapers as it may"


class UnknownProxyPool(UnprocessableEntity):
    code = "unknown_proxy_pool"
    default_message = "proxy_pool is not a pool the operator configured"


class AddressNotAllowed(UnprocessableEntity):
    code = "address_not_allowed"
    default_message = "url points at an address crawls may not reach"


class UnknownItemKey(UnprocessableEntity):
    default_message = "item_key is not one of the scraper's fields"


class UnknownRunEvents(UnprocessableEntity):
    code = "unknown_event_types"
    default_message = "events names types that are not run events"


class WebhookRefused(UnprocessableEntity):
    default_message = "webhook-hub refused the webhook"


class NoPortalYet(Conflict):
    """webhook-hub opens its portal to a service's tenant only once the service subscribed
    it (`hub.subscriptions.portal-link`): a client without webhooks has nothing there."""

    code = "no_webhooks_in_portal"
    default_message = (
        "The delivery portal shows your webhooks' deliveries: add a webhook first, then open it."
    )


class RegistrationFailed(ServiceUnavailable):
    code = "registration_failed"
    default_message = (
        "The webhook could not be recorded; nothing was registered (its subscription in "
        "webhook-hub was removed). Try again."
    )


class RequestInvalid(UnprocessableEntity):
    """What FastAPI's request validation answers (rendered by servicekit), for the docs."""

    default_message = "body.url: Field required"


# The `responses=` of an operation that can raise the errors named, in this service's envelope.
declared = flat_error_responses


AUTH = (Unauthorized, Forbidden)
__all__ = ["AUTH", "InvalidCursor", "declared"]
