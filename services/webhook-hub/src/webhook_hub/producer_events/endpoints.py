"""`POST /webhooks/events`: for producers that do not speak NATS."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Header, Response, status
from servicekit.auth.dependencies import AdminPrincipal, AdminPrincipalWithoutSession

from webhook_hub.errors import (
    AUTH,
    BODY,
    EventDataInvalid,
    EventNotRecorded,
    EventTypeInactive,
    EventTypeNotOwned,
    TenantNotAllowed,
    declared,
)
from webhook_hub.producer_events.dependencies import ProducerEventServiceDep
from webhook_hub.producer_events.group_commit import SingleEvents, get_single_events
from webhook_hub.producer_events.schemas import (
    BatchEventResult,
    EventAccepted,
    EventBatch,
    EventBatchResults,
    EventSubmission,
    parse_batched_event,
)
from webhook_hub.producer_events.service import Accepted, Submission

router = APIRouter(prefix="/events", tags=["events"])


@router.post(
    "",
    response_model=EventAccepted,
    status_code=status.HTTP_202_ACCEPTED,
    responses=declared(
        *AUTH,
        *BODY,
        TenantNotAllowed,
        EventTypeNotOwned,
        EventTypeInactive,
        EventDataInvalid,
        EventNotRecorded,
    ),
    summary="Submit an event",
)
async def submit_event(
    body: EventSubmission,
    principal: AdminPrincipalWithoutSession,
    events: Annotated[SingleEvents, Depends(get_single_events)],
    idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
) -> Response:
    """Accept an event for dispatch to every matching subscription. A consumer's key submits
    only types its owner registered, for its own owner only (403 otherwise); an operator key
    submits any type for any tenant. An event of a registered type must match the type's JSON
    schema (422 naming the failing path, e.g. `data.total: 'x' is not of type 'number'`) and
    is refused while the type is deactivated; nothing is recorded then. A repeated
    `Idempotency-Key` within the window returns the first event's id and publishes nothing
    new (`Idempotent-Replayed: true`). Answered once the event is committed; 503 when the
    database could not be reached (nothing recorded: send it again)."""
    event_id, fresh = await events.submit(principal, body, idempotency_key)
    # The bytes `EventAccepted(id=event_id)` renders to, without its validation and
    # serialisation on every request (documented by `response_model` all the same).
    return Response(
        b'{"id":"%s"}' % str(event_id).encode(),
        status_code=status.HTTP_202_ACCEPTED,
        media_type="application/json",
        headers=_REPLAYED if not fresh else None,
    )


_REPLAYED = {"Idempotent-Replayed": "true"}


@router.post(
    "/batch",
    response_model=EventBatchResults,
    status_code=status.HTTP_200_OK,
    responses=declared(*AUTH, *BODY),
    summary="Submit events in a batch",
)
async def submit_events(
    body: EventBatch, principal: AdminPrincipal, service: ProducerEventServiceDep
) -> EventBatchResults:
    """Up to 500 events, each `{type, data, tenant?, idempotency_key?}` as the
    single form's body with its `Idempotency-Key` inside, judged exactly as the single form
    judges it, one by one. The answer has one result per event, in order: `accepted` (202,
    its id), `duplicate` (202, the id of the key's first event, within the window or earlier
    in this batch; nothing recorded) or `refused` (the single form's status, `code` and
    `error` for that event, e.g. 403 `event_type_not_owned` or 422 `event_data_invalid`), so
    a bad event refuses only itself. Every accepted event is recorded in one transaction. A
    body that is not such a batch (not an object, no `events`, more than 500 or none) is a
    422 for the whole (`MAX_BATCH_EVENTS`)."""
    outcomes = await service.submit_batch(
        principal,
        [
            Submission(parsed, parsed.idempotency_key)
            if not isinstance(parsed := parse_batched_event(raw), Exception)
            else parsed
            for raw in body.events
        ],
    )
    results: list[BatchEventResult] = []
    counts = {"accepted": 0, "duplicate": 0, "refused": 0}
    for outcome in outcomes:
        if isinstance(outcome, Accepted):
            kind = "accepted" if outcome.fresh else "duplicate"
            result = BatchEventResult(result=kind, status=202, id=outcome.id)
        else:
            error = outcome.error
            kind = "refused"
            result = BatchEventResult(
                result=kind,
                status=error.status_code,
                code=error.code,
                error=error.message,
                **error.extra,
            )
        counts[kind] += 1
        results.append(result)
    return EventBatchResults(
        results=results,
        accepted=counts["accepted"],
        duplicates=counts["duplicate"],
        refused=counts["refused"],
    )
