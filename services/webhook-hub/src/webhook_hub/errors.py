"""webhook-hub's errors: every domain error it raises, as a subclass of a servicekit kind with
its `code` and message, and the OpenAPI responses they generate (`declared(...)`). The envelope
is servicekit's flat one, `{"error": <text>, "code": <code>, ...}`: the spec fixes `error` as a
string (its 422 adds `invalid_events`); `code` lets clients branch without parsing text."""

from __future__ import annotations

from collections.abc import Iterable

from servicekit.errors import (
    BadRequest,
    Conflict,
    Forbidden,
    InvalidCursor,
    NotFound,
    PayloadTooLarge,
    ServiceUnavailable,
    Unauthorized,
    UnprocessableEntity,
)
from servicekit.web.errors import flat_error_responses

# --- subscriptions ---------------------------------------------------------------------------


class SubscriptionNotFound(NotFound):
    code = "subscription_not_found"
    default_message = "Subscription not found"


class UnknownEventTypes(UnprocessableEntity):
    """The spec's 422: names that are not active event types, listed in `invalid_events`."""

    code = "unknown_event_types"
    default_message = "Unknown event types: order.piad"

    def __init__(self, names: Iterable[str] = ("order.piad",)) -> None:
        invalid = sorted(set(names))
        super().__init__(
            f"Unknown event types: {', '.join(invalid)}", extra={"invalid_events": invalid}
        )


class EndpointNotAllowed(UnprocessableEntity):
    code = "endpoint_not_allowed"
    default_message = "endpoint_url is refused: it resolves to a private or reserved address"


class PersonalDataNotApproved(Forbidden):
    code = "personal_data_not_approved"
    default_message = "Event types of personal data need an operator's approval"

    def __init__(self, names: Iterable[str] = ("inquiry.created",)) -> None:
        personal = sorted(set(names))
        super().__init__(
            f"Event types {', '.join(personal)} carry personal data; only owners an operator "
            "approved may subscribe to them (ask your operator for approval)",
            extra={"personal_events": personal},
        )


class SubscriptionLimitReached(Conflict):
    code = "subscription_limit_reached"
    default_message = "This owner has the most subscriptions allowed; delete one first"

    def __init__(self, limit: int = 10_000) -> None:
        super().__init__(
            f"This owner has {limit} subscriptions, the most allowed; delete one first",
            extra={"limit": limit},
        )


class InvalidExpression(UnprocessableEntity):
    """A `filter` or `transform` that does not compile: which field, where in it, and why."""

    code = "invalid_expression"
    default_message = "filter: Syntax error: mismatched input '<EOF>' (line 1, column 14)"

    def __init__(
        self,
        field: str = "filter",
        line: int = 1,
        column: int = 14,
        reason: str = "Syntax error: mismatched input '<EOF>'",
    ) -> None:
        super().__init__(
            f"{field}: {reason} (line {line}, column {column})",
            extra={"field": field, "line": line, "column": column, "reason": reason},
        )


class OrderingWithRateLimit(UnprocessableEntity):
    """Ordered delivery and a rate limit on one subscription: not offered (the ordered
    claims hand out each key's turn without the rate limit's bucket; README, "Ordered
    delivery by key")."""

    code = "validation_error"
    default_message = (
        "body.ordering: ordered delivery cannot be combined with rate_limit_per_second; "
        "remove one of them"
    )

    def __init__(self) -> None:
        super().__init__(
            self.default_message,
            extra={
                "details": [
                    {
                        "loc": ["body", "ordering"],
                        "msg": "ordered delivery cannot be combined with rate_limit_per_second",
                        "type": "value_error",
                    }
                ]
            },
        )


class BurstWithoutRateLimit(UnprocessableEntity):
    """A burst for a subscription without a rate limit, named as a body's field error is."""

    code = "validation_error"
    default_message = "body.rate_limit_burst: a burst needs rate_limit_per_second"

    def __init__(self) -> None:
        super().__init__(
            self.default_message,
            extra={
                "details": [
                    {
                        "loc": ["body", "rate_limit_burst"],
                        "msg": "a burst needs rate_limit_per_second",
                        "type": "value_error",
                    }
                ]
            },
        )


# --- deliveries ------------------------------------------------------------------------------


class DeliveryNotFound(NotFound):
    code = "delivery_not_found"
    default_message = "Delivery not found"


# --- event types -----------------------------------------------------------------------------


class EventTypeNotFound(NotFound):
    """Also another owner's type or a service's type for a consumer's key: never an oracle."""

    code = "event_type_not_found"
    default_message = "Event type not found"


class EventTypeTaken(Conflict):
    code = "event_type_taken"
    default_message = "The event type belongs to a service or another consumer; choose another name"


class DeclaredByService(Conflict):
    code = "declared_by_service"
    default_message = (
        "A service declares this type in its code: only is_active may be changed over HTTP"
    )


class InvalidEventSchema(UnprocessableEntity):
    code = "invalid_schema"
    default_message = "schema.type: 'nope' is not valid under any of the given schemas"


class ExampleDoesNotMatchSchema(UnprocessableEntity):
    code = "example_payload_invalid"
    default_message = "example_payload.total: 'x' is not of type 'number'"


# --- producer events -------------------------------------------------------------------------


class TenantNotAllowed(Forbidden):
    code = "tenant_not_allowed"
    default_message = (
        "A consumer's key submits events only for its own owner; events for other tenants "
        "need an operator key"
    )


class EventTypeNotOwned(Forbidden):
    code = "event_type_not_owned"
    default_message = (
        "The event type is not one you registered (POST /webhooks/event-types); services' "
        "types need an operator key"
    )


class EventTypeInactive(UnprocessableEntity):
    code = "event_type_inactive"
    default_message = "The event type is deactivated: events of it are refused"


class EventDataInvalid(UnprocessableEntity):
    code = "event_data_invalid"
    default_message = "data.total: 'x' is not of type 'number'"


class EventNotRecorded(ServiceUnavailable):
    code = "event_not_recorded"
    default_message = (
        "The database could not be reached: the event was not recorded; send it again "
        "(with the same Idempotency-Key, it is recorded at most once)"
    )

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message, headers={"Retry-After": "1"})


# --- portal ----------------------------------------------------------------------------------


class TenantNotSubscribed(NotFound):
    """A service asked a portal link (NATS) for a tenant it has no subscription of: services
    speak only for their own tenants, as their `list` and `delete` see only their own."""

    code = "tenant_not_found"
    default_message = "No subscription of this tenant was made by this source"


class NeedsLevel(Forbidden):
    """A page action the session's level does not allow (as the API's 403)."""

    code = "insufficient_level"
    default_message = "This needs the 'write' access level"


# The `responses=` of an operation that can raise the errors named, in this service's envelope.
declared = flat_error_responses


# What every authenticated operation can answer; with a JSON body, also these.
AUTH = (Unauthorized, Forbidden)
BODY = (PayloadTooLarge, UnprocessableEntity)
__all__ = ["AUTH", "BODY", "BadRequest", "InvalidCursor", "declared"]
