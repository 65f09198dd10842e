"""Events from producers outside NATS, idempotent on their Idempotency-Key for a window.

Who may submit what: a consumer's key submits only types its owner registered, and only for
itself (the event's tenant is its owner, so nobody else receives it); an operator key (CLI
only) submits any type for any tenant, or for everyone. Whoever submits it, an event of a
registered type is refused while the type is deactivated and must match its schema (422,
nothing recorded); an operator's event of a type nobody registered is accepted as it is and
reaches `*` subscriptions only (nobody can subscribe to the name).

A single event is a batch of one: both forms go through `submit_batch`, so they are judged
by the same rules and written by the same statements (the types read at once, the keys
claimed at once, the outbox rows inserted at once).
"""

from __future__ import annotations

import contextvars
import uuid
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from servicekit.auth.api_keys import AccessLevel
from servicekit.auth.dependencies import Principal
from servicekit.errors import ServiceError
from servicekit.events import new_event_id
from servicekit.events.outbox import NewEvent, record_events
from sqlmodel.ext.asyncio.session import AsyncSession

from webhook_hub.errors import EventTypeNotOwned, TenantNotAllowed
from webhook_hub.event_types.repository import EventTypeRepository, SubmittableType
from webhook_hub.event_types.service import checked_event_data
from webhook_hub.producer_events.repository import IdempotencyKeyRepository
from webhook_hub.producer_events.schemas import EventSubmission

# A key read as held but gone when read (pruned between the two statements, at the window's
# very edge) is claimed again; more rounds than this would mean something else is wrong.
_CLAIM_ROUNDS = 3


@dataclass(frozen=True, slots=True)
class Accepted:
    id: uuid.UUID
    # False: the key was held inside the window, and `id` is its first event's.
    fresh: bool


@dataclass(frozen=True, slots=True)
class Refused:
    error: ServiceError


Outcome = Accepted | Refused


@dataclass(frozen=True, slots=True)
class Submission:
    event: EventSubmission
    idempotency_key: str | None


def event_tenant(
    principal: Principal, submission: EventSubmission, event_type: SubmittableType | None
) -> str | None:
    """The tenant the event is recorded for; 403 when the caller may not send it, 422 when
    its type is deactivated or its data breaks the type's schema."""
    if principal.level is AccessLevel.OPERATOR:
        if event_type is not None:
            checked_event_data(event_type, submission.data)
        return submission.tenant
    if submission.tenant is not None and submission.tenant != principal.owner:
        raise TenantNotAllowed()
    # The same answer whether the name is unknown, a service's or another owner's: no oracle
    # for other owners' type names.
    if event_type is None or event_type.owner != principal.owner:
        raise EventTypeNotOwned(
            f"Event type {submission.type!r} is not a type you registered "
            "(POST /webhooks/event-types); services' types need an operator key"
        )
    checked_event_data(event_type, submission.data)
    return principal.owner


def first_of_each_key(keys: Sequence[Hashable | None]) -> dict[int, int]:
    """For each position holding a key seen earlier in the batch, the position of its first
    occurrence: later ones are duplicates of the first, whatever becomes of it."""
    first: dict[Hashable, int] = {}
    repeats: dict[int, int] = {}
    for position, key in enumerate(keys):
        if key is None:
            continue
        if key in first:
            repeats[position] = first[key]
        else:
            first[key] = position
    return repeats


class ProducerEventService:
    def __init__(self, session: AsyncSession, window: timedelta) -> None:
        self.session = session
        self.window = window

    async def submit(
        self, principal: Principal, submission: EventSubmission, idempotency_key: str | None
    ) -> tuple[uuid.UUID, bool]:
        """The event's id, and whether it is new (False: the key was seen inside the window);
        the error of a refused event raised."""
        (outcome,) = await self.submit_batch(principal, [Submission(submission, idempotency_key)])
        if isinstance(outcome, Refused):
            raise outcome.error
        return outcome.id, outcome.fresh

    async def submit_batch(
        self, principal: Principal, items: Sequence[Submission | ServiceError]
    ) -> list[Outcome]:
        """One outcome per item, in order. An item that is already an error (its body did not
        parse) is refused with it; the others are authorized and checked one by one, and
        every accepted one is written in the session's transaction."""
        return await self.submit_each([(principal, item) for item in items])

    async def submit_each(
        self,
        items: Sequence[tuple[Principal, Submission | ServiceError]],
        contexts: Sequence[contextvars.Context] | None = None,
    ) -> list[Outcome]:
        """`submit_batch` for items of several callers at once (the single form's group
        commit): each judged as its caller's, keys matched within each caller's owner;
        `contexts`, one per item, are the requests' (their events' spans are theirs)."""
        outcomes: list[Outcome | None] = [None] * len(items)
        names = {item.event.type for _, item in items if isinstance(item, Submission)}
        types = await EventTypeRepository(self.session).submittable(names) if names else {}
        # Accepted so far: position, owner, event, tenant.
        passed: list[tuple[int, str, Submission, str | None]] = []
        for position, (principal, item) in enumerate(items):
            if isinstance(item, ServiceError):
                outcomes[position] = Refused(item)
                continue
            try:
                tenant = event_tenant(principal, item.event, types.get(item.event.type))
            except ServiceError as error:
                outcomes[position] = Refused(error)
                continue
            passed.append((position, principal.owner, item, tenant))
        # A refused event does not use its key up: keys are matched among accepted ones only,
        # and a key is its owner's (another owner's same key is another key).
        repeats = first_of_each_key(
            [
                None if item.idempotency_key is None else (owner, item.idempotency_key)
                for _, owner, item, _ in passed
            ]
        )
        candidates: dict[str, dict[str, uuid.UUID]] = {}
        for index, (_, owner, item, _) in enumerate(passed):
            if item.idempotency_key is not None and index not in repeats:
                candidates.setdefault(owner, {})[item.idempotency_key] = new_event_id()
        held: dict[tuple[str, str], uuid.UUID] = {}
        fresh_keys: set[tuple[str, str]] = set()
        # Owners in one order in every transaction (and each one's keys in key order): two
        # flushes sharing keys lock them in the same order and cannot deadlock each other.
        for owner in sorted(candidates):
            owner_held, owner_fresh = await self._claim(owner, candidates[owner])
            held.update({(owner, key): event_id for key, event_id in owner_held.items()})
            fresh_keys.update((owner, key) for key in owner_fresh)
        written: list[NewEvent] = []
        for index, (position, owner, item, tenant) in enumerate(passed):
            key = item.idempotency_key
            if index in repeats:
                continue  # resolved below, once its first occurrence is
            if key is None:
                event_id, fresh = new_event_id(), True
            else:
                event_id, fresh = held[owner, key], (owner, key) in fresh_keys
            outcomes[position] = Accepted(event_id, fresh)
            if fresh:
                context = None if contexts is None else contexts[position]
                written.append(
                    NewEvent(event_id, item.event.type, item.event.data, tenant, context)
                )
        for index, first in repeats.items():
            first_outcome = outcomes[passed[first][0]]
            assert isinstance(first_outcome, Accepted)
            outcomes[passed[index][0]] = Accepted(first_outcome.id, fresh=False)
        await record_events(self.session, written)
        return [outcome for outcome in outcomes if outcome is not None]

    async def _claim(
        self, owner: str, candidates: dict[str, uuid.UUID]
    ) -> tuple[dict[str, uuid.UUID], set[str]]:
        """Each key's event id, and the keys claimed now (their events are new)."""
        if not candidates:
            return {}, set()
        keys = IdempotencyKeyRepository(self.session)
        ids: dict[str, uuid.UUID] = {}
        fresh: set[str] = set()
        pending = dict(candidates)
        for _ in range(_CLAIM_ROUNDS):
            claimed = await keys.claim(owner, pending, datetime.now(UTC) - self.window)
            ids.update(claimed)
            fresh.update(claimed)
            unclaimed = [key for key in pending if key not in claimed]
            if not unclaimed:
                return ids, fresh
            existing = await keys.held(owner, unclaimed)
            ids.update(existing)
            pending = {key: pending[key] for key in unclaimed if key not in existing}
            if not pending:
                return ids, fresh
        raise RuntimeError(f"idempotency keys neither claimed nor held: {sorted(pending)}")
