"""Errors of the endpoint form, placed at their field: the API's own messages (pydantic's and
the service's), so the page and the API never disagree about what is valid."""

from __future__ import annotations

from pydantic import ValidationError
from servicekit.errors import ServiceError

from webhook_hub.errors import EndpointNotAllowed, PersonalDataNotApproved, UnknownEventTypes

FORM_FIELDS = ("endpoint_url", "events", "description", "timeout_seconds")
# pydantic's "Value error, " prefix says nothing to a person filling a form.
_PREFIXES = ("Value error, ", "Assertion failed, ")


def _message(text: str) -> str:
    for prefix in _PREFIXES:
        if text.startswith(prefix):
            text = text[len(prefix) :]
    return text[:1].upper() + text[1:]


def subscription_form_errors(exc: ValidationError | ServiceError) -> dict[str, str]:
    """Field name -> the first message about it; `form` for what belongs to no field."""
    if isinstance(exc, UnknownEventTypes | PersonalDataNotApproved):
        return {"events": exc.message}
    if isinstance(exc, EndpointNotAllowed):
        return {"endpoint_url": exc.message}
    if isinstance(exc, ServiceError):
        return {"form": exc.message}
    errors: dict[str, str] = {}
    for error in exc.errors():
        loc = error["loc"]
        field = str(loc[0]) if loc and str(loc[0]) in FORM_FIELDS else "form"
        errors.setdefault(field, _message(str(error["msg"])))
    return errors
