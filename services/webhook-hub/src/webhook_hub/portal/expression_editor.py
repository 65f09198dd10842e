"""The portal's CEL editor: a subscription's `filter` and `transform`, run against a sample
event (the chosen type's example payload from the catalog, or a pasted one) before saving.

Authorised as the rest of the portal: the session's owner scopes the subscription (another
owner's is a 404) and writing is needed to preview or save (a preview runs the expression
on the server). Saving goes through `SubscriptionService.update`, so the page and the API
refuse the same expressions with the same positions.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from webhook_hub.dispatch.expression_tally import Counts, totals_of
from webhook_hub.expressions import (
    ExpressionError,
    ExpressionRefused,
    Kind,
    compile_expression,
    event_time_text,
    event_variable,
)
from webhook_hub.models import EventType
from webhook_hub.subscriptions.service import SubscriptionService
from webhook_hub.wire_format import render_body

# A pasted sample is an event's data: bounded as the API bounds request bodies, well below.
MAX_SAMPLE_CHARS = 64 * 1024


@dataclass(frozen=True)
class Outcome:
    """What one expression did to the sample: `text` (a verdict or a JSON result) or the
    `error` with its line and column (0 when it has none: a refusal on this event)."""

    field: str
    text: str = ""
    error: str = ""
    line: int = 0
    column: int = 0


@dataclass(frozen=True)
class Preview:
    outcomes: list[Outcome]
    # The request body the sample would be sent as, when it would be sent.
    body: str | None
    sample_error: str = ""


def sample_data(pasted: str, example: EventType | None) -> Any:
    """The sample's `data`: the pasted JSON if any, else the type's example payload.
    ValueError (with a sentence) when the pasted text is not JSON."""
    if pasted.strip():
        if len(pasted) > MAX_SAMPLE_CHARS:
            raise ValueError(f"The sample is longer than {MAX_SAMPLE_CHARS} characters.")
        try:
            return json.loads(pasted)
        except ValueError as exc:
            raise ValueError(f"The sample is not JSON: {exc}.") from None
    return dict(example.example_payload) if example is not None else {}


def run_preview(
    filter_source: str, transform_source: str, event_type: str, data: Any, tenant: str
) -> Preview:
    """Compile and run both expressions on one sample event, as dispatch would (pure)."""
    now = datetime.now(UTC)
    variable = event_variable(
        id=str(uuid.uuid4()),
        type=event_type,
        tenant=tenant,
        time=event_time_text(now),
        data=data,
        source="portal-preview",
    )
    outcomes = []
    delivered = True
    sent: Any = data
    sources: list[tuple[Kind, str]] = [("filter", filter_source), ("transform", transform_source)]
    for kind, source in sources:
        if not source.strip():
            continue
        try:
            expression = compile_expression(source, field=kind, kind=kind)
        except ExpressionError as exc:
            outcomes.append(
                Outcome(kind, error=exc.message, line=exc.position.line, column=exc.position.column)
            )
            delivered = False
            continue
        try:
            if kind == "filter":
                delivered = delivered and expression.matches(variable)
                verdict = "true: this event is delivered" if delivered else "false: left out"
                outcomes.append(Outcome(kind, text=verdict))
            else:
                sent = expression.evaluate(variable)
                outcomes.append(Outcome(kind, text=json.dumps(sent, indent=2, ensure_ascii=False)))
        except ExpressionRefused as exc:
            outcomes.append(Outcome(kind, error=f"on this event: {exc.message}"))
            delivered = False
    body = None
    if delivered:
        payload = json.dumps(sent, ensure_ascii=False, separators=(",", ":")).encode()
        rendered = json.loads(render_body(event_type, now, payload))
        body = json.dumps(rendered, indent=2, ensure_ascii=False)
    return Preview(outcomes, body)


async def expression_counts(service: SubscriptionService, subscription_id: uuid.UUID) -> Counts:
    """What the subscription's expressions did so far (as the workers last flushed it)."""
    return await totals_of(await service.session.connection(), subscription_id)
