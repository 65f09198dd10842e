"""Dispatch: every event on `EVENTS` becomes one delivery per matching active subscription.

Matching is a read: the deliveries of an event are handed to the engine at once and written
with the outcome of their first attempt, and the event is acknowledged only after that (or
after they are stored as pending), so its message stands for them until then. A delivery's
id comes from its subscription and event, so an event seen again (redelivered by JetStream,
or republished) is recognised and not sent twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from pydantic_core import to_json
from servicekit.events import CloudEvent
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from webhook_hub.delivery_engine.jobs import DeliveryJob, delivery_id_for, render_body
from webhook_hub.delivery_engine.policy import signing_secrets
from webhook_hub.settings import Settings

# With, in the same round trip (init plans, evaluated once): whether each owner may receive
# personal data, which of the batch's types are personal, and the deliveries of these
# events stored already (by any worker, at any earlier time) as (subscription, event) pairs.
# One statement, because dispatch pays it for every fetched batch, however small.
_MATCHING = text(
    """
    SELECT s.id, s.owner, s.events, s.endpoint_url, s.secret, s.secret_old,
           s.secret_rotated_at, s.headers, s.timeout_seconds, s.send_trace_context,
           coalesce(c.personal_data_approved, false) AS approved,
           ARRAY(SELECT name FROM event_types
                 WHERE visibility = 'personal' AND name = ANY(CAST(:types AS varchar[])))
               AS personal,
           -- One index probe per event id, whatever the statistics say: `OFFSET 0` keeps
           -- the planner from turning this into a join, which it hashed over a sequential
           -- scan of all deliveries while the table's statistics were older than its rows
           -- (33 to 250 ms per batch; probed, 3 ms for 500 ids).
           ARRAY(SELECT ARRAY[d.subscription_id, d.event_id]
                 FROM unnest(CAST(:event_ids AS uuid[])) AS e(id),
                      LATERAL (SELECT subscription_id, event_id FROM deliveries
                               WHERE event_id = e.id OFFSET 0) AS d)
               AS stored
    FROM subscriptions s LEFT JOIN consumers c ON c.owner = s.owner
    WHERE s.is_active AND s.events && CAST(:types AS varchar[])
    """
)


class Dispatcher:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    async def deliveries_of(
        self, connection: AsyncConnection, events: Sequence[CloudEvent]
    ) -> list[list[DeliveryJob]]:
        """For each event (in order), its deliveries not stored yet."""
        types = sorted({event.type for event in events} | {"*"})
        # One array literal, not a list psycopg would adapt item by item (the hot path).
        event_ids = "{" + ",".join(str(event.id) for event in events) + "}"
        subscriptions = (
            await connection.execute(_MATCHING, {"types": types, "event_ids": event_ids})
        ).all()
        if not subscriptions:
            return [[] for _ in events]
        stored = {(pair[0], pair[1]) for pair in subscriptions[0].stored}
        now = datetime.now(UTC)
        secrets = {
            sub.id: signing_secrets(
                sub.secret,
                sub.secret_old,
                sub.secret_rotated_at,
                now,
                self.settings.secret_transition_seconds,
            )
            for sub in subscriptions
        }
        personal = set(subscriptions[0].personal)
        per_event: list[list[DeliveryJob]] = []
        for event in events:
            jobs: list[DeliveryJob] = []
            private = event.type in personal
            # Encoded and rendered once per event, shared by its deliveries.
            payload_json = to_json(event.data)
            body = render_body(event.type, event.time, payload_json)
            for sub in subscriptions:
                if event.type not in sub.events and "*" not in sub.events:
                    continue
                if event.tenant is not None and sub.owner != event.tenant:
                    continue
                # Personal data of others: approved owners only (an event for one tenant is
                # that owner's own).
                if private and event.tenant is None and not sub.approved:
                    continue
                if (sub.id, event.id) in stored:
                    continue
                jobs.append(
                    DeliveryJob(
                        delivery_id=delivery_id_for(sub.id, event.id),
                        subscription_id=sub.id,
                        event_type=event.type,
                        event_time=event.time,
                        payload_json=payload_json,
                        attempts=0,
                        endpoint_url=sub.endpoint_url,
                        secrets=secrets[sub.id],
                        headers=sub.headers,
                        timeout_seconds=sub.timeout_seconds,
                        event_id=event.id,
                        stored=False,
                        owner=sub.owner,
                        body=body,
                        traceparent=event.traceparent,
                        tracestate=event.tracestate,
                        send_trace_context=sub.send_trace_context,
                    )
                )
            per_event.append(jobs)
        return per_event
