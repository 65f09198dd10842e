"""The delivery store: every statement that writes `deliveries` or `delivery_attempts`, and
the engine's and dispatch's reads of them, in one place (tests/test_delivery_store.py fails
if another module writes either table). The portal and the API read through `deliveries/`.

Two entry points:

- `DeliveryStore`, the worker's (built once in worker.py, passed to dispatch and the
  engine): it holds the session factory its transactions come from, dispatch's own
  connection and the claim loop's, and opens a transaction per recorded batch, per failing
  of unreadable rows.
- `DeliveryWrites`, the writes within a unit of work someone else owns (an API request's
  session, which also locks the portal's rollup; a test's session rolled back at its end).
  `DeliveryStore.record` uses it too, inside its own transaction.

Each statement keeps the connection style it is fastest in (the engine's hot path, 22,000
events/s; the styles are not mixed within a statement):

- `MATCHING` (dispatch's read of each fetched batch): psycopg's own connection, autocommit,
  the statement prepared. Through SQLAlchemy (session, pool checkout, result rows) the read
  of 50 events cost 590 µs of the worker's CPU; this way 170 to 500.
- `COPY deliveries` / `COPY delivery_attempts` (each recorded batch): the psycopg driver
  connection under the recording transaction's SQLAlchemy connection, binary COPY: values
  adapted in psycopg's C code, not item by item as array parameters are.
- The claims (`CLAIM`, `CLAIM_PROBES`, `EXCLUDED_DUE`): the claim loop's own psycopg
  connection, autocommit, prepared. Each is one statement, atomic by itself: no BEGIN and
  COMMIT round trips, and no planning of the CTE at every claim (0.7 to 1 ms of
  PostgreSQL's CPU a claim, measured with EXPLAIN ANALYZE; the generic plan scans the same
  due index).
- The release, resumption, failing of unreadable rows, the INSERT fallbacks of a batch COPY
  refused, the UPDATE of retried deliveries, the subscription locks and tallies, recover and
  `NOTIFY`: SQLAlchemy `text` on the transaction's AsyncConnection, one statement per batch
  over arrays (unnest), sharing the transaction (and its locking order: subscriptions first,
  then deliveries) with the COPY.
- A test event's delivery (`add`) and a retry now (`schedule_now`): the ORM session, as the
  API answers with the `Delivery` object itself; one row per request, off the hot path.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import structlog
from psycopg.rows import namedtuple_row
from servicekit.db.engine import to_libpq_url
from servicekit.db.notify import NotifyListener
from servicekit.events import RawCloudEvent
from sqlalchemy import BindParameter, bindparam, text
from sqlalchemy.ext.asyncio import AsyncConnection, async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from webhook_hub.delivery_engine.decisions import (
    RetryRules,
    SubscriptionTally,
    decided,
    tally,
)
from webhook_hub.delivery_engine.disabling import disable_reason, disable_subscription
from webhook_hub.delivery_engine.jobs import (
    AttemptResult,
    DeliveryJob,
    FirstAttempt,
    NextStep,
    StoredDelivery,
)
from webhook_hub.delivery_engine.outcomes import (
    as_arrays,
    attempt_row,
    first_row,
    ordered_row,
    pending_row,
)
from webhook_hub.errors import SubscriptionNotFound
from webhook_hub.models import Delivery, DeliveryStatus
from webhook_hub.settings import Settings

DELIVERIES_CHANNEL = "webhook_deliveries"
# A log line about a key's released deliveries names at most this many of them.
HELD_IDS_LOGGED = 20
logger = structlog.get_logger(__name__)

# --- dispatch ------------------------------------------------------------------------------

# With, in the same round trip (init plans, evaluated once): whether each owner may receive
# personal data, which of the batch's types are personal, and the deliveries of these
# events stored already (by any worker, at any earlier time) as (subscription, event) pairs.
# One statement, because dispatch pays it for every fetched batch, however small.
MATCHING = """
    SELECT s.id, s.owner, s.events, s.endpoint_url, s.secret, s.secret_old,
           s.secret_rotated_at, s.headers, s.timeout_seconds, s.send_trace_context,
           coalesce(c.personal_data_approved, false) AS approved,
           -- The retry schedule and timeout in effect but for the service's settings (issue 32):
           -- resolved here, once per subscription and batch; null: the settings'.
           coalesce(s.retry_schedule, c.default_retry_schedule) AS retry_schedule,
           coalesce(s.timeout_seconds, c.default_timeout_seconds) AS timeout_in_effect,
           s.filter, s.transform,
           s.rate_limit_per_second IS NOT NULL AS rate_limited,
           s.ordering,
           ARRAY(SELECT name FROM event_types
                 WHERE visibility = 'personal' AND name = ANY(CAST(%(types)s AS varchar[])))
               AS personal,
           -- One index probe per event id, whatever the statistics say: `OFFSET 0` keeps
           -- the planner from turning this into a join, which it hashed over a sequential
           -- scan of all deliveries while the table's statistics were older than its rows
           -- (33 to 250 ms per batch; probed, 3 ms for 500 ids). The probe is of one
           -- partition: the event's key (`log_time`, pruned at run time), and the rows the
           -- migration to partitions filed under `-infinity`.
           ARRAY(SELECT ARRAY[d.subscription_id, d.event_id]
                 FROM unnest(CAST(%(event_ids)s AS uuid[]),
                             CAST(%(log_times)s AS timestamptz[])) AS e(id, log_time),
                      LATERAL (SELECT subscription_id, event_id FROM deliveries
                               WHERE event_id = e.id
                                 AND (log_time = e.log_time OR log_time = '-infinity')
                               OFFSET 0) AS d)
               AS stored
    FROM subscriptions s LEFT JOIN consumers c ON c.owner = s.owner
    WHERE s.is_active AND s.events && CAST(%(types)s AS varchar[])
"""

# --- the claim loop ------------------------------------------------------------------------

# The status reaches the server as a literal (rendered from the enum), not a bound parameter:
# the due index is partial on `status = 'pending'`, and only a literal lets every plan use it.
_PENDING: BindParameter[str] = bindparam(
    "pending", DeliveryStatus.PENDING.value, literal_execute=True
)
# The claims run on a connection of their own (psycopg's, autocommit, prepared), as dispatch's
# read does: each is one statement, atomic by itself, so no BEGIN/COMMIT round trips, no
# planning of the CTE at every call, no SQLAlchemy result rows. The status is a literal: the
# due index is partial on `status = 'pending'`, and only a literal lets every plan use it.
# The claims' lease of what they picked, and the job's columns. A leased delivery is not due
# before its lease ends either: the claims' scans of the due index (`next_attempt_at <=
# now()`) then stop before the deliveries in flight instead of reading each of them to see
# its lease (thousands of rows per claim with a slow endpoint).
# The timeout and retry schedule are those in effect (issue 32): the subscription's, else its
# owner's default; the timeout's last fallback is the service's setting (`%(timeout)s`), the
# schedule's (null here) is applied by `decisions.next_step`.
_LEASE_PICKED = """
    UPDATE deliveries d
    SET lease_until = now() + make_interval(secs => coalesce(s.timeout_seconds,
            c.default_timeout_seconds, %(timeout)s) * 2 + %(lease_extra)s),
        next_attempt_at = now() + make_interval(secs => coalesce(s.timeout_seconds,
            c.default_timeout_seconds, %(timeout)s) * 2 + %(lease_extra)s)
    FROM picked, subscriptions s LEFT JOIN consumers c ON c.owner = s.owner
    WHERE d.id = picked.id AND s.id = d.subscription_id AND d.status = 'pending'
      AND (d.lease_until IS NULL OR d.lease_until < now()) AND s.is_active
    RETURNING d.id, d.subscription_id, d.event_type, d.event_time,
              d.payload::text AS payload_json, d.attempts,
              s.endpoint_url, s.secret, s.secret_old, s.secret_rotated_at, s.headers,
              coalesce(s.timeout_seconds, c.default_timeout_seconds, %(timeout)s)
                  AS timeout_seconds,
              s.owner, d.traceparent, d.tracestate, s.send_trace_context,
              coalesce(s.retry_schedule, c.default_retry_schedule) AS retry_schedule,
              s.rate_limit_per_second
"""
# A limited subscription's bucket now: what it held, refilled at its rate since, up to its
# size (rate_limit.effective_burst).
_TOKENS_NOW = """least(coalesce(s.rate_limit_burst, greatest(1, ceil(s.rate_limit_per_second))),
                 b.tokens + s.rate_limit_per_second
                            * greatest(0, extract(epoch FROM now() - b.refilled_at)))"""
CLAIM = "".join(
    (
        """
    WITH candidates AS (
        -- Bounded scan of the due index, so a deep backlog does not make every claim slower.
        -- Rate-limited subscriptions are claimed by `limited` instead: their backlog, waiting
        -- for tokens, would fill this scan.
        SELECT d.id, d.subscription_id, d.next_attempt_at, s.owner
        FROM deliveries d JOIN subscriptions s ON s.id = d.subscription_id
        WHERE d.status = 'pending' AND d.next_attempt_at <= now()
          AND (d.lease_until IS NULL OR d.lease_until < now())
          AND s.is_active
          AND s.rate_limit_per_second IS NULL
          AND NOT (d.subscription_id = ANY(CAST(%(excluded)s AS uuid[])))
          AND NOT (s.owner = ANY(CAST(%(saturated_owners)s AS varchar[])))
          -- Ordered deliveries go by their key's turn (`CLAIM_ORDERED`) only.
          AND d.order_key IS NULL
        ORDER BY d.next_attempt_at
        LIMIT %(scan)s
    ), buckets AS (
        -- The token buckets of limited subscriptions with a whole token and a due delivery,
        -- locked until this statement ends (its own transaction). SKIP LOCKED: a bucket
        -- another worker is claiming from is that worker's this time (no waiting); a bucket
        -- it spent meanwhile is read again as it left it.
        SELECT b.subscription_id, s.owner, """,
        _TOKENS_NOW,
        """ AS tokens
        FROM subscription_rate_buckets b JOIN subscriptions s ON s.id = b.subscription_id,
        -- One probe per bucket of the pending index by subscription: the subscription's
        -- pending delivery due first (a leased one is due only when its lease ends), due now
        -- or not. The subscription as a range of one value, and the order the index's own:
        -- then no other plan can give the first row without sorting them all. (An EXISTS
        -- was hashed against every due delivery; an equality let the planner walk the due
        -- index instead, through a partition of another subscription's backlog per bucket,
        -- where the statistics counted two subscriptions.)
        LATERAL (SELECT d.next_attempt_at FROM deliveries d
                 WHERE d.status = 'pending'
                   AND d.subscription_id >= b.subscription_id
                   AND d.subscription_id <= b.subscription_id
                 ORDER BY d.subscription_id, d.next_attempt_at
                 LIMIT 1) AS due_one
        WHERE s.is_active AND s.rate_limit_per_second IS NOT NULL
          AND NOT (b.subscription_id = ANY(CAST(%(excluded)s AS uuid[])))
          AND NOT (s.owner = ANY(CAST(%(saturated_owners)s AS varchar[])))
          AND due_one.next_attempt_at <= now()
          AND """,
        _TOKENS_NOW,
        """ >= 1
        FOR UPDATE OF b SKIP LOCKED
    ), limited AS (
        -- As many of each one's due deliveries, oldest first, as it has whole tokens.
        SELECT p.id, p.subscription_id, p.next_attempt_at, g.owner
        FROM buckets g,
        -- (The subscription as a range of one value, as in `buckets`: its own index.)
        LATERAL (SELECT d.id, d.subscription_id, d.next_attempt_at FROM deliveries d
                 WHERE d.status = 'pending'
                   AND d.subscription_id >= g.subscription_id
                   AND d.subscription_id <= g.subscription_id
                   AND d.next_attempt_at <= now()
                   AND (d.lease_until IS NULL OR d.lease_until < now())
                 ORDER BY d.subscription_id, d.next_attempt_at
                 LIMIT least(floor(g.tokens), %(per_subscription)s)) AS p
    ), due AS (
        SELECT id, next_attempt_at,
               row_number() OVER (PARTITION BY subscription_id ORDER BY next_attempt_at) AS rank,
               row_number() OVER (PARTITION BY owner ORDER BY next_attempt_at) AS owner_rank
        FROM (SELECT * FROM candidates UNION ALL SELECT * FROM limited) AS c
    ), picked AS (
        SELECT id FROM due WHERE rank <= %(per_subscription)s AND owner_rank <= %(per_owner)s
        ORDER BY next_attempt_at LIMIT %(limit)s
    ), leased AS (
    """,
        _LEASE_PICKED,
        """
    ), spent AS (
        -- Each bucket read pays for what was leased of its subscription (not for what was
        -- picked and then found leased by another worker), and counts its refill as done.
        UPDATE subscription_rate_buckets b
        SET tokens = g.tokens
                     - (SELECT count(*) FROM leased l WHERE l.subscription_id = g.subscription_id),
            refilled_at = greatest(b.refilled_at, now())
        FROM buckets g
        WHERE b.subscription_id = g.subscription_id
    )
    SELECT * FROM leased
    """,
    )
)
# The probe of each subscription whose breaker is open here and whose probe is due: its
# pending delivery next in line, due or not (a probe that waited for the retry schedule would
# leave a recovered endpoint waiting as long).
CLAIM_PROBES = "".join(
    (
        """
    WITH picked AS (
        SELECT p.id FROM unnest(CAST(%(probing)s AS uuid[])) AS u(subscription_id),
        LATERAL (SELECT d.id FROM deliveries d
                 WHERE d.status = 'pending' AND d.subscription_id = u.subscription_id
                   AND d.next_attempt_at IS NOT NULL AND d.order_key IS NULL
                   AND (d.lease_until IS NULL OR d.lease_until < now())
                 ORDER BY d.next_attempt_at LIMIT 1 FOR UPDATE SKIP LOCKED) AS p
    )
    """,
        _LEASE_PICKED,
    )
)
# After a claim that excluded subscriptions or owners at their cap: whether any of their
# deliveries are due (then a finished attempt should wake the claim loop).
EXCLUDED_DUE = """
    SELECT EXISTS (
        SELECT 1 FROM deliveries d JOIN subscriptions s ON s.id = d.subscription_id
        WHERE d.status = 'pending' AND d.next_attempt_at <= now()
          AND (d.lease_until IS NULL OR d.lease_until < now())
          AND s.is_active AND d.order_key IS NULL
          AND (d.subscription_id = ANY(CAST(%(saturated)s AS uuid[]))
               OR s.owner = ANY(CAST(%(saturated_owners)s AS varchar[])))
    )
"""
# The ordered claim (issue 32, item 3; README "Ordered delivery by key"). Walks the keys of
# `ordered_pending` from `after` (a loose index scan of its primary key, at most `scan` keys:
# round robin over claims), takes each key's head (its lowest sequence still pending), and
# leases, for each head that is free (not leased: nothing of its key in flight; due: not
# waiting for a retry), the key's run: the head and the deliveries behind it, in order, up to
# `run`, all at or below the `watermark` (every event up to it has all its deliveries stored:
# none of a lower sequence can still appear). The head's row is locked (SKIP LOCKED) so two
# workers never both lease a key; a run stops before any delivery of it that is not free.
# Heads whose delivery is no longer pending (failed by hand, moved) leave the queue. The last
# row says how many keys were scanned, the last of them, and how many heads were beyond the
# watermark (rows with a null id; `store.claim_ordered` reads them apart).
CLAIM_ORDERED = """
    WITH RECURSIVE keys AS (
        (SELECT q.subscription_id, q.order_key FROM ordered_pending q
         WHERE (q.subscription_id, q.order_key)
               > (CAST(%(after_subscription)s AS uuid), CAST(%(after_key)s AS text))
         ORDER BY q.subscription_id, q.order_key LIMIT 1)
        UNION ALL
        SELECT n.subscription_id, n.order_key FROM keys k, LATERAL (
            SELECT q.subscription_id, q.order_key FROM ordered_pending q
            WHERE (q.subscription_id, q.order_key) > (k.subscription_id, k.order_key)
            ORDER BY q.subscription_id, q.order_key LIMIT 1) n
    ), scanned AS MATERIALIZED (
        SELECT subscription_id, order_key FROM keys LIMIT %(scan)s
    ), heads AS MATERIALIZED (
        SELECT k.subscription_id, k.order_key, h.order_seq, h.delivery_id, h.log_time
        FROM scanned k, LATERAL (
            SELECT q.order_seq, q.delivery_id, q.log_time FROM ordered_pending q
            WHERE q.subscription_id = k.subscription_id AND q.order_key = k.order_key
            ORDER BY q.order_seq LIMIT 1) h
    ), stale AS (
        DELETE FROM ordered_pending q USING heads h
        WHERE q.subscription_id = h.subscription_id AND q.order_key = h.order_key
          AND q.order_seq = h.order_seq
          AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.id = h.delivery_id
                          AND d.log_time = h.log_time AND d.status = 'pending')
    ), free AS MATERIALIZED (
        SELECT h.subscription_id, h.order_key, h.order_seq, s.owner
        FROM heads h
        JOIN deliveries d ON d.id = h.delivery_id AND d.log_time = h.log_time
        JOIN subscriptions s ON s.id = h.subscription_id
        WHERE h.order_seq <= %(watermark)s AND d.status = 'pending'
          AND (d.lease_until IS NULL OR d.lease_until < now())
          AND (d.next_attempt_at IS NULL OR d.next_attempt_at <= now())
          AND s.is_active
          AND NOT (h.subscription_id = ANY(CAST(%(excluded)s AS uuid[])))
          AND NOT (s.owner = ANY(CAST(%(saturated_owners)s AS varchar[])))
        FOR UPDATE OF d SKIP LOCKED
    ), picked AS (
        SELECT subscription_id, order_key, order_seq FROM (
            SELECT f.*,
                   row_number() OVER (PARTITION BY subscription_id ORDER BY order_seq) AS rank,
                   row_number() OVER (PARTITION BY owner ORDER BY order_seq) AS owner_rank
            FROM free f) r
        WHERE rank <= %(per_subscription)s AND owner_rank <= %(per_owner)s
        ORDER BY order_seq LIMIT %(limit)s
    ), runs AS (
        SELECT r.delivery_id, r.log_time, r.order_seq, p.subscription_id, p.order_key
        FROM picked p, LATERAL (
            SELECT q.delivery_id, q.log_time, q.order_seq FROM ordered_pending q
            WHERE q.subscription_id = p.subscription_id AND q.order_key = p.order_key
              AND q.order_seq >= p.order_seq AND q.order_seq <= %(watermark)s
            ORDER BY q.order_seq LIMIT %(run)s) r
    ), leasable AS (
        SELECT x.delivery_id, x.log_time FROM (
            SELECT r.delivery_id, r.log_time,
                   bool_and(d.status = 'pending'
                            AND (d.lease_until IS NULL OR d.lease_until < now()))
                       OVER (PARTITION BY r.subscription_id, r.order_key
                             ORDER BY r.order_seq) AS free
            FROM runs r JOIN deliveries d ON d.id = r.delivery_id AND d.log_time = r.log_time
        ) x WHERE x.free
    ), leased AS (
        UPDATE deliveries d
        SET lease_until = now() + make_interval(secs => coalesce(
                s.timeout_seconds, c.default_timeout_seconds, %(timeout)s) * 2 + %(lease_extra)s),
            next_attempt_at = now() + make_interval(secs => coalesce(
                s.timeout_seconds, c.default_timeout_seconds, %(timeout)s) * 2 + %(lease_extra)s)
        FROM leasable l, subscriptions s LEFT JOIN consumers c ON c.owner = s.owner
        WHERE d.id = l.delivery_id AND d.log_time = l.log_time AND s.id = d.subscription_id
        RETURNING d.id, d.subscription_id, d.event_type, d.event_time,
                  d.payload::text AS payload_json, d.attempts,
                  s.endpoint_url, s.secret, s.secret_old, s.secret_rotated_at, s.headers,
                  coalesce(s.timeout_seconds, c.default_timeout_seconds, %(timeout)s)
                      AS timeout_seconds,
                  s.owner, d.traceparent, d.tracestate, s.send_trace_context,
                  d.order_key, d.order_seq,
                  coalesce(s.retry_schedule, c.default_retry_schedule) AS retry_schedule,
                  s.rate_limit_per_second
    )
    SELECT l.*,
           (SELECT count(*) FROM scanned) AS scanned,
           (SELECT subscription_id FROM scanned
            ORDER BY subscription_id DESC, order_key DESC LIMIT 1) AS last_subscription,
           (SELECT order_key FROM scanned
            ORDER BY subscription_id DESC, order_key DESC LIMIT 1) AS last_key,
           (SELECT count(*) FROM heads WHERE order_seq > %(watermark)s) AS beyond
    FROM (SELECT 1) AS one LEFT JOIN leased l ON true
"""
_FAIL_UNREADABLE = text(
    """
    UPDATE deliveries d SET status = 'failed', lease_until = NULL, next_attempt_at = NULL,
        completed_at = now(), last_error = u.error
    FROM unnest(CAST(:ids AS uuid[]), CAST(:errors AS text[])) AS u(id, error)
    WHERE d.id = u.id
    """
)
# A subscription's breaker closed (a probe succeeded): its held deliveries, and those waiting
# for a retry, are due at once. Through the due index: the pending deliveries, not the
# subscription's whole log.
_RESUME = text(
    "UPDATE deliveries SET next_attempt_at = now() WHERE status = :pending"
    " AND next_attempt_at > now() AND subscription_id = ANY(CAST(:ids AS uuid[]))"
).bindparams(_PENDING)
# Claimed deliveries that waited too long for a slot go back to the claim loops at once.
_RELEASE = text(
    "UPDATE deliveries SET lease_until = NULL, next_attempt_at = least(next_attempt_at, now())"
    " WHERE id = ANY(CAST(:ids AS uuid[]))"
    " AND status = :pending"
).bindparams(_PENDING)

# --- recording outcomes --------------------------------------------------------------------

# One statement per batch over arrays (unnest), not one per row: the worker's CPU, not the
# database, bounds throughput, and row-by-row executemany costs it dearly.
_INSERT_ATTEMPTS = text(
    """
    INSERT INTO delivery_attempts
        (delivery_id, attempted_at, status_code, response_body, duration_ms, error)
    SELECT a.* FROM unnest(
        CAST(:delivery_id AS uuid[]), CAST(:attempted_at AS timestamptz[]),
        CAST(:status_code AS int[]), CAST(:response_body AS text[]),
        CAST(:duration_ms AS int[]), CAST(:error AS text[])
    ) AS a(delivery_id, attempted_at, status_code, response_body, duration_ms, error)
    -- A subscription deleted while its delivery was in flight took the delivery with it.
    WHERE EXISTS (SELECT 1 FROM deliveries d WHERE d.id = a.delivery_id)
    """
)
_INSERT_DELIVERIES = text(
    """
    INSERT INTO deliveries (id, subscription_id, event_id, event_type, payload, event_time,
                            traceparent, tracestate, status, attempts, next_attempt_at, last_attempt_at,
                            last_status_code, last_error, created_at, completed_at,
                            first_status_code, first_response_body, first_duration_ms,
                            first_error, lease_until, log_time)
    SELECT d.* FROM unnest(
        CAST(:id AS uuid[]), CAST(:subscription_id AS uuid[]), CAST(:event_id AS uuid[]),
        CAST(:event_type AS text[]), CAST(:payload AS json[]),
        CAST(:event_time AS timestamptz[]), CAST(:traceparent AS text[]),
        CAST(:tracestate AS text[]), CAST(:status AS text[]),
        CAST(:attempts AS int[]), CAST(:next_attempt_at AS timestamptz[]),
        CAST(:last_attempt_at AS timestamptz[]), CAST(:last_status_code AS int[]),
        CAST(:last_error AS text[]), CAST(:created_at AS timestamptz[]),
        CAST(:completed_at AS timestamptz[]), CAST(:first_status_code AS int[]),
        CAST(:first_response_body AS text[]), CAST(:first_duration_ms AS int[]),
        CAST(:first_error AS text[]), CAST(:lease_until AS timestamptz[]),
        CAST(:log_time AS timestamptz[])
    ) AS d(id, subscription_id, event_id, event_type, payload, event_time, traceparent,
           tracestate, status, attempts,
           next_attempt_at, last_attempt_at, last_status_code, last_error, created_at,
           completed_at, first_status_code, first_response_body, first_duration_ms,
           first_error, lease_until, log_time)
    -- A subscription deleted since its event was matched takes the delivery with it.
    WHERE EXISTS (SELECT 1 FROM subscriptions s WHERE s.id = d.subscription_id)
    -- The same event reached the subscription before (a republished event): keep the first.
    -- Every copy of an event has the same key (partitions.Layout.log_time_of), so the
    -- unique index of the partitioned table, which must hold it, still refuses the second.
    ON CONFLICT (subscription_id, event_id, log_time) DO NOTHING
    RETURNING id
    """
)
# Column order of outcomes.py's rows, for COPY; the INSERTs' array parameters have the same
# names.
DELIVERY_COLUMNS = (
    "id",
    "subscription_id",
    "event_id",
    "event_type",
    "payload",
    "event_time",
    "traceparent",
    "tracestate",
    "status",
    "attempts",
    "next_attempt_at",
    "last_attempt_at",
    "last_status_code",
    "last_error",
    "created_at",
    "completed_at",
    "first_status_code",
    "first_response_body",
    "first_duration_ms",
    "first_error",
    "lease_until",
    "log_time",
)
# Each column's type as binary COPY writes it: the table's own, but `text` for the `json`
# payload (json's binary form is its text; psycopg's json dumper would encode the str again).
# tests/test_outcomes.py checks them against the table.
DELIVERY_COPY_TYPES = (
    "uuid",
    "uuid",
    "uuid",
    "varchar",
    "text",
    "timestamptz",
    "varchar",
    "varchar",
    "varchar",
    "int4",
    "timestamptz",
    "timestamptz",
    "int4",
    "varchar",
    "timestamptz",
    "timestamptz",
    "int4",
    "text",
    "int4",
    "text",
    "timestamptz",
    "timestamptz",
)
# The attempt's own id is the column's default (gen_random_uuid()).
ATTEMPT_COLUMNS = (
    "delivery_id",
    "attempted_at",
    "status_code",
    "response_body",
    "duration_ms",
    "error",
)
ATTEMPT_COPY_TYPES = ("uuid", "timestamptz", "int4", "varchar", "int4", "varchar")
_UPDATE_DELIVERIES = text(
    """
    UPDATE deliveries d SET status = u.status, attempts = d.attempts + 1,
        next_attempt_at = u.next_attempt_at, lease_until = NULL,
        last_attempt_at = u.attempted_at, last_status_code = u.status_code,
        last_error = u.error, completed_at = u.completed_at
    FROM unnest(
        CAST(:ids AS uuid[]), CAST(:statuses AS text[]), CAST(:next_attempt_at AS timestamptz[]),
        CAST(:attempted_at AS timestamptz[]), CAST(:status_codes AS int[]),
        CAST(:errors AS text[]), CAST(:completed_at AS timestamptz[])
    ) AS u(id, status, next_attempt_at, attempted_at, status_code, error, completed_at)
    WHERE d.id = u.id
    """
)
# Ordered deliveries from dispatch (never attempted there): stored pending, not due (a null
# `next_attempt_at` keeps them out of the due index's scans), and queued under their key.
_INSERT_ORDERED = text(
    """
    WITH inserted AS (
        INSERT INTO deliveries (id, subscription_id, event_id, event_type, payload, event_time,
                                traceparent, tracestate, status, attempts, next_attempt_at,
                                created_at, log_time, order_key, order_seq)
        SELECT d.id, d.subscription_id, d.event_id, d.event_type, d.payload, d.event_time,
               d.traceparent, d.tracestate, 'pending', 0, NULL, :created_at, d.log_time,
               d.order_key, d.order_seq
        FROM unnest(
            CAST(:id AS uuid[]), CAST(:subscription_id AS uuid[]), CAST(:event_id AS uuid[]),
            CAST(:event_type AS text[]), CAST(:payload AS json[]),
            CAST(:event_time AS timestamptz[]), CAST(:traceparent AS text[]),
            CAST(:tracestate AS text[]), CAST(:log_time AS timestamptz[]),
            CAST(:order_key AS text[]), CAST(:order_seq AS bigint[])
        ) AS d(id, subscription_id, event_id, event_type, payload, event_time, traceparent,
               tracestate, log_time, order_key, order_seq)
        WHERE EXISTS (SELECT 1 FROM subscriptions s WHERE s.id = d.subscription_id)
        -- The same event again (republished: another sequence): the first copy keeps its turn.
        ON CONFLICT (subscription_id, event_id, log_time) DO NOTHING
        RETURNING id, subscription_id, order_key, order_seq, log_time
    )
    INSERT INTO ordered_pending (subscription_id, order_key, order_seq, delivery_id, log_time)
    SELECT subscription_id, order_key, order_seq, id, log_time FROM inserted
    ON CONFLICT DO NOTHING
    """
)
# A key's head failed and waits for its retry: the deliveries behind it are held from its
# first failure.
_BLOCK_ORDERED = text(
    """
    UPDATE ordered_pending q SET blocked_since = coalesce(q.blocked_since, u.at)
    FROM unnest(CAST(:subscription_id AS uuid[]), CAST(:order_key AS text[]),
                CAST(:order_seq AS bigint[]), CAST(:at AS timestamptz[]))
         AS u(subscription_id, order_key, order_seq, at)
    WHERE q.subscription_id = u.subscription_id AND q.order_key = u.order_key
      AND q.order_seq = u.order_seq
    """
)
# A key's head succeeded or gave up: it leaves the queue, and the next is the head.
_DONE_ORDERED = text(
    """
    DELETE FROM ordered_pending q
    USING unnest(CAST(:subscription_id AS uuid[]), CAST(:order_key AS text[]),
                 CAST(:order_seq AS bigint[])) AS u(subscription_id, order_key, order_seq)
    WHERE q.subscription_id = u.subscription_id AND q.order_key = u.order_key
      AND q.order_seq = u.order_seq
    """
)
# Of those, the heads that held their keys (failed before): read before they leave, and
# before the deliveries behind them (done in the same batch, a run) leave too.
_HOLDERS = text(
    """
    SELECT q.subscription_id, q.order_key, q.order_seq, q.delivery_id, q.blocked_since
    FROM ordered_pending q
    JOIN unnest(CAST(:subscription_id AS uuid[]), CAST(:order_key AS text[]),
                CAST(:order_seq AS bigint[])) AS u(subscription_id, order_key, order_seq)
      ON q.subscription_id = u.subscription_id AND q.order_key = u.order_key
         AND q.order_seq = u.order_seq
    WHERE q.blocked_since IS NOT NULL
    """
)
# The deliveries a head held (those behind it while it failed): which one, from when (their
# creation, or its first failure if later) until now.
_MARK_HELD = text(
    """
    UPDATE deliveries d SET held_by = u.head, held_since = greatest(d.created_at, u.since),
        held_until = now()
    FROM unnest(CAST(:subscription_id AS uuid[]), CAST(:order_key AS text[]),
                CAST(:order_seq AS bigint[]), CAST(:head AS uuid[]),
                CAST(:since AS timestamptz[]))
         AS u(subscription_id, order_key, order_seq, head, since),
         ordered_pending q
    WHERE q.subscription_id = u.subscription_id AND q.order_key = u.order_key
      AND q.order_seq > u.order_seq AND d.id = q.delivery_id AND d.log_time = q.log_time
    RETURNING u.head, d.id, d.held_since
    """
)
_UPDATE_SUBSCRIPTION = text(
    """
    UPDATE subscriptions SET
        failure_count = CASE WHEN :reset THEN :failures ELSE failure_count + :failures END,
        last_delivery_at = COALESCE(:last_success, last_delivery_at)
    WHERE id = :id
    RETURNING id, failure_count, is_active
    """
)

# --- locks, wake-ups, the API's writes -----------------------------------------------------

# Subscriptions about to gain deliveries, locked as a foreign key's check would lock each
# (deliveries have none: migration 0015): a deletion waits until the writer commits, and its
# trigger then deletes those rows too. Those deleted already are not returned.
LOCK_SUBSCRIPTIONS = text(
    "SELECT id FROM subscriptions WHERE id = ANY(CAST(:ids AS uuid[])) FOR KEY SHARE"
)
_RESCHEDULE_FAILED = text(
    """
    WITH moved AS (
        UPDATE deliveries SET status = 'pending', next_attempt_at = now(), lease_until = NULL,
            completed_at = NULL
        WHERE subscription_id = :id AND status = 'failed' AND created_at >= :since
        RETURNING created_at
    )
    SELECT date_bin('1 hour', created_at, TIMESTAMPTZ '2000-01-01 00:00Z'), count(*)
    FROM moved GROUP BY 1
    """
)
_RESCHEDULE_RETRYING = text(
    """
    WITH moved AS (
        UPDATE deliveries SET next_attempt_at = now(), lease_until = NULL
        WHERE subscription_id = :id AND status = 'pending' AND attempts > 0
          AND next_attempt_at > now() AND created_at >= :since
          AND (lease_until IS NULL OR lease_until < now())
        RETURNING created_at
    )
    SELECT date_bin('1 hour', created_at, TIMESTAMPTZ '2000-01-01 00:00Z'), count(*)
    FROM moved GROUP BY 1
    """
)
_SCHEDULE_PICKED = text(
    """
    WITH moved AS (
        UPDATE deliveries SET status = 'pending', next_attempt_at = now(), lease_until = NULL,
            completed_at = NULL
        WHERE subscription_id = :id AND id = ANY(CAST(:ids AS uuid[]))
          AND (status = 'failed'
               OR (status = 'pending' AND (lease_until IS NULL OR lease_until < now())))
        RETURNING created_at
    )
    SELECT date_bin('1 hour', created_at, TIMESTAMPTZ '2000-01-01 00:00Z'), count(*)
    FROM moved GROUP BY 1
    """
)

# Ordered deliveries made pending again by hand (a retry, a recover): back in their key's
# queue, in their place by sequence (the claims take ordered deliveries only from there).
_REQUEUE_ORDERED = text(
    """
    INSERT INTO ordered_pending (subscription_id, order_key, order_seq, delivery_id, log_time)
    SELECT d.subscription_id, d.order_key, d.order_seq, d.id, d.log_time FROM deliveries d
    WHERE d.subscription_id = :id AND d.status = :pending AND d.order_key IS NOT NULL
    ON CONFLICT DO NOTHING
    """
).bindparams(_PENDING)

# --- the log's partitions (maintenance.py) ------------------------------------------------

# Pending deliveries of a partition about to be dropped, filed under a live one: a
# cross-partition UPDATE moves each row (same id, attempts and schedule). Leased ones (an
# attempt in flight) are left for the next round: moving a row its worker is about to
# update would fail that worker's update ("tuple to be updated was already moved").
_MOVE_PENDING = text(
    """
    UPDATE deliveries SET log_time = :target
    WHERE log_time >= CAST(:lower AS timestamptz) AND log_time < CAST(:upper AS timestamptz)
      AND status = :pending AND (lease_until IS NULL OR lease_until < now())
    """
).bindparams(_PENDING)
_MOVE_ORDERED = text(
    """
    UPDATE ordered_pending q SET log_time = :target
    FROM deliveries d
    WHERE q.log_time >= CAST(:lower AS timestamptz) AND q.log_time < CAST(:upper AS timestamptz)
      AND d.id = q.delivery_id AND d.log_time = :target
    """
)
_PENDING_IN_RANGE = text(
    """
    SELECT count(*) FROM deliveries
    WHERE log_time >= CAST(:lower AS timestamptz) AND log_time < CAST(:upper AS timestamptz)
      AND status = :pending
    """
).bindparams(_PENDING)


async def move_pending(
    connection: AsyncConnection, lower: str, upper: str, target: datetime
) -> tuple[int, int]:
    """File the pending deliveries of [lower, upper) (bounds as timestamptz text, `-infinity`
    for none) under `target`; (moved, still there because leased)."""
    bounds = {"lower": lower, "upper": upper}
    moved = await connection.execute(_MOVE_PENDING, {**bounds, "target": target})
    # The ordered queue names each delivery's partition: it follows the rows it names.
    await connection.execute(_MOVE_ORDERED, {**bounds, "target": target})
    left = await connection.scalar(_PENDING_IN_RANGE, bounds)
    return int(getattr(moved, "rowcount", 0) or 0), int(left or 0)


async def restore_pending(connection: AsyncConnection, detached: str, target: datetime) -> int:
    """The pending deliveries of a partition detached since they were moved (made pending
    again meanwhile: a retry, a recover) written back into the log under `target`."""
    columns = ", ".join(c for c in DELIVERY_COLUMNS if c not in ("lease_until", "log_time"))
    statement = text(
        # The names are ours (columns, and a partition's name from the catalog).
        f"INSERT INTO deliveries ({columns}, lease_until, log_time)"  # noqa: S608
        f" SELECT {columns}, NULL, :target FROM {detached} WHERE status = :pending"
        " ON CONFLICT DO NOTHING"
    ).bindparams(_PENDING)
    result = await connection.execute(statement, {"target": target})
    # An ordered one is in its key's queue under the partition it was made pending in (a
    # retry's requeue): the queue follows it to `target`, else the claim, which reads the row
    # by (id, log_time), never finds the key's head and the key is held for good.
    for requeue in (_REQUEUE_RESTORED, _REPOINT_RESTORED):
        await connection.execute(
            text(requeue.format(detached=detached)).bindparams(_PENDING), {"target": target}
        )
    return int(getattr(result, "rowcount", 0) or 0)


# The names are ours (a partition's name from the catalog); `{detached}` is filled in.
_REQUEUE_RESTORED = """
    INSERT INTO ordered_pending (subscription_id, order_key, order_seq, delivery_id, log_time)
    SELECT d.subscription_id, d.order_key, d.order_seq, d.id, :target FROM {detached} d
    WHERE d.status = :pending AND d.order_key IS NOT NULL
      AND EXISTS (SELECT 1 FROM deliveries l WHERE l.id = d.id AND l.log_time = :target)
    ON CONFLICT DO NOTHING
"""
_REPOINT_RESTORED = """
    UPDATE ordered_pending q SET log_time = :target FROM {detached} d
    WHERE q.delivery_id = d.id AND d.status = :pending AND d.order_key IS NOT NULL
      AND EXISTS (SELECT 1 FROM deliveries l WHERE l.id = d.id AND l.log_time = :target)
"""


async def wake_delivery_workers(session: AsyncSession) -> None:
    """Delivered at commit, so workers look for due deliveries right away."""
    connection = await session.connection()
    await connection.execute(text(f"NOTIFY {DELIVERIES_CHANNEL}"))


class DeliveryWrites:
    """The writes of deliveries and attempts within a unit of work the caller owns (commits
    or rolls back): an API request's, a test's, or one of `DeliveryStore`'s transactions."""

    def __init__(
        self, session: AsyncSession, clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    ) -> None:
        self.session = session
        # When new rows are written (their partition key depends on it): tests move it.
        self._clock = clock

    async def wake_workers(self) -> None:
        await wake_delivery_workers(self.session)

    async def add(
        self,
        subscription_id: uuid.UUID,
        *,
        event_id: uuid.UUID,
        event_type: str,
        payload: dict[str, Any],
        event_time: datetime,
    ) -> Delivery:
        """A new pending delivery; SubscriptionNotFound when the subscription is gone (its
        row is locked until the transaction ends, as the engine's are: migration 0015)."""
        connection = await self.session.connection()
        live = await connection.execute(LOCK_SUBSCRIPTIONS, {"ids": [str(subscription_id)]})
        if live.first() is None:
            raise SubscriptionNotFound()
        delivery = Delivery(
            subscription_id=subscription_id,
            event_id=event_id,
            event_type=event_type,
            payload=payload,
            event_time=event_time,
        )
        self.session.add(delivery)
        await self.session.flush()
        await wake_delivery_workers(self.session)
        return delivery

    async def schedule_now(self, delivery: Delivery) -> None:
        """Attempt again now, whatever its state; its attempt history stays."""
        delivery.status = DeliveryStatus.PENDING
        delivery.next_attempt_at = await self._now()
        delivery.lease_until = None
        delivery.completed_at = None
        self.session.add(delivery)
        await self.session.flush()
        if delivery.order_key is not None:
            await self.requeue_ordered(delivery.subscription_id)
        await wake_delivery_workers(self.session)

    async def requeue_ordered(self, subscription_id: uuid.UUID) -> None:
        """The subscription's pending ordered deliveries back in their keys' queues (those
        made pending by hand)."""
        connection = await self.session.connection()
        await connection.execute(_REQUEUE_ORDERED, {"id": subscription_id})

    async def reschedule_failed_since(
        self, subscription_id: uuid.UUID, since: datetime
    ) -> dict[datetime, int]:
        """Failed deliveries created since `since` due again now: how many, per UTC hour of
        creation (the portal's rollup forgets those hours)."""
        connection = await self.session.connection()
        rows = await connection.execute(_RESCHEDULE_FAILED, {"id": subscription_id, "since": since})
        counts = {hour: int(count) for hour, count in rows}
        await self.requeue_ordered(subscription_id)
        await wake_delivery_workers(self.session)
        return counts

    async def _now(self) -> datetime:
        connection = await self.session.connection()
        value = await connection.scalar(text("SELECT now()"))
        assert isinstance(value, datetime)
        return value

    async def resume(self, subscription_ids: Set[uuid.UUID]) -> None:
        """Subscriptions whose breaker closed: their pending deliveries are due now, and the
        claim loops are woken to take them."""
        if not subscription_ids:
            return
        connection = await self.session.connection()
        await connection.execute(_RESUME, {"ids": [str(i) for i in subscription_ids]})
        await wake_delivery_workers(self.session)

    async def release(self, delivery_ids: Sequence[uuid.UUID]) -> None:
        """Claimed deliveries that waited too long for a slot: their leases end now, and the
        claim loops are woken to take them back."""
        if not delivery_ids:
            return
        connection = await self.session.connection()
        await connection.execute(_RELEASE, {"ids": [str(i) for i in delivery_ids]})
        await wake_delivery_workers(self.session)

    async def record_outcomes(
        self,
        results: Sequence[AttemptResult],
        settings: Settings,
        set_aside: Sequence[DeliveryJob] = (),
        due_at: Mapping[int, tuple[datetime | None, datetime | None]] | None = None,
    ) -> list[uuid.UUID]:
        """Write a batch of results (and deliveries set aside unsent, as pending): the
        attempt log, each delivery's next step, each subscription's consecutive-failure
        count, and auto-disable. Returns the ids of subscriptions it disabled. Set-aside
        deliveries whose id's `int` is in `due_at` are due and leased as it says (held by
        their subscription's breaker: due later; kept by this worker: leased to it), the
        others due now.

        An event's first attempt has no delivery row yet (its event message stands for it
        until then): the row is written here, already in the state the attempt left it in
        and holding that attempt (its `first_*` columns), so a delivery that succeeds at once
        costs one row. Later attempts are rows of `delivery_attempts`."""
        if not results and not set_aside:
            return []
        session = self.session
        ordered = sorted(results, key=lambda r: r.attempted_at)
        # Subscriptions first, in id order, as deleting one does (its row, then its
        # deliveries): locking in the other order would deadlock with a concurrent delete.
        tallies = tally(ordered)
        disabled, live = await _tally_subscriptions(session, tallies, settings)
        connection = await session.connection()
        # The last result per delivery wins (a batch holds at most one attempt of each,
        # normally).
        rules = RetryRules(
            settings.retry_schedule_seconds,
            settings.retry_jitter,
            settings.retry_after_cap_seconds,
        )
        steps = {r.job.delivery_id: (r, decided(r, rules)) for r in ordered}
        # An event's first attempt is written in the row it creates, if its subscription is
        # still there (one deleted since its event was matched took its deliveries with it).
        firsts = [(r, step) for r, step in steps.values() if isinstance(r.job, FirstAttempt)]
        # Every other result (a retry; an earlier copy of the same first attempt) is a log row.
        in_rows = {id(r) for r, _ in firsts}
        logged = [r for r in ordered if id(r) not in in_rows]
        # The results' subscriptions are locked by their tally's UPDATE, which found those
        # that exist; the set-asides' others are locked here.
        live |= await _lock_subscriptions(
            connection, {job.subscription_id for job in set_aside} - tallies.keys()
        )
        firsts = [(r, step) for r, step in firsts if r.job.subscription_id in live]
        # No foreign key refuses the attempts of deliveries deleted with their subscription
        # (the log is partitioned: migration 0020): those are left out here.
        attempt_rows = [attempt_row(r) for r in logged if r.job.subscription_id in live]
        set_aside = [job for job in set_aside if job.subscription_id in live]
        now = self._clock()
        filed = settings.delivery_log_layout.filing(now)
        if set_aside:
            ordered_new = [job for job in set_aside if job.order_key is not None]
            if ordered_new:
                set_aside = [job for job in set_aside if job.order_key is None]
                await _store_ordered(connection, ordered_new, now, filed)
        new_rows = [first_row(r, step, filed(r.job.event_time)) for r, step in firsts]
        new_rows += [
            pending_row(
                job,
                now,
                filed(job.event_time),
                *(due_at.get(job.delivery_id.int, _NOW) if due_at else _NOW),
            )
            for job in set_aside
        ]
        try:
            # The common case, by COPY: nothing stored before, no subscription deleted
            # meanwhile.
            async with connection.begin_nested():
                await _copy(
                    connection, "deliveries", DELIVERY_COLUMNS, DELIVERY_COPY_TYPES, new_rows
                )
                await _copy(
                    connection,
                    "delivery_attempts",
                    ATTEMPT_COLUMNS,
                    ATTEMPT_COPY_TYPES,
                    attempt_rows,
                )
        except psycopg.errors.IntegrityError:
            # Otherwise row by row what may be written: first copies only, live references
            # only.
            if new_rows:
                parameters = as_arrays(DELIVERY_COLUMNS, new_rows)
                inserted = set((await connection.execute(_INSERT_DELIVERIES, parameters)).scalars())
                # A first attempt whose delivery was stored before (its event came again)
                # joins that delivery's attempt log.
                attempt_rows += [
                    attempt_row(r) for r, _ in firsts if r.job.delivery_id not in inserted
                ]
            if attempt_rows:
                await connection.execute(_INSERT_ATTEMPTS, as_arrays(ATTEMPT_COLUMNS, attempt_rows))
        # Set-aside deliveries wake no claim loop: this worker's takes them back as its slots
        # free (`wake_claims_on_free_slot`), the others' at their poll. A NOTIFY per recorded
        # batch woke every worker's claim loop for deliveries of subscriptions at their cap,
        # a claim that found nothing it could take, several times a second.
        updates = [(r, step) for r, step in steps.values() if isinstance(r.job, StoredDelivery)]
        in_order = [(r, step) for r, step in updates if r.job.order_key is not None]
        if updates:
            await connection.execute(
                _UPDATE_DELIVERIES,
                {
                    "ids": [r.job.delivery_id for r, _ in updates],
                    "statuses": [step.status for _, step in updates],
                    "next_attempt_at": [step.next_attempt_at for _, step in updates],
                    "attempted_at": [r.attempted_at for r, _ in updates],
                    "status_codes": [r.status_code for r, _ in updates],
                    "errors": [r.error for r, _ in updates],
                    "completed_at": [step.completed_at for _, step in updates],
                },
            )
        if in_order:
            await _advance_ordered(connection, in_order)
        return disabled

    # --- the portal's bulk recovery (issue 35); added last to leave the rest as it was ---

    async def reschedule_retrying_since(
        self, subscription_id: uuid.UUID, since: datetime
    ) -> dict[datetime, int]:
        """Pending deliveries created since `since` that already failed an attempt and wait
        for their next one (not yet due), due now (an attempt in flight, leased, is left to finish): how
        many per UTC hour of creation."""
        connection = await self.session.connection()
        rows = await connection.execute(
            _RESCHEDULE_RETRYING, {"id": subscription_id, "since": since}
        )
        await wake_delivery_workers(self.session)
        return {hour: int(count) for hour, count in rows}

    async def schedule_now_many(
        self, subscription_id: uuid.UUID, delivery_ids: Sequence[uuid.UUID]
    ) -> dict[datetime, int]:
        """Those of `delivery_ids` that are `subscription_id`'s and failed or pending (not
        leased: an attempt in flight is left to finish) due now: how many per UTC hour of
        creation. Succeeded ones stay as they are."""
        if not delivery_ids:
            return {}
        connection = await self.session.connection()
        rows = await connection.execute(
            _SCHEDULE_PICKED,
            {"id": subscription_id, "ids": [str(d) for d in delivery_ids]},
        )
        counts = {hour: int(count) for hour, count in rows}
        await self.requeue_ordered(subscription_id)
        await wake_delivery_workers(self.session)
        return counts


_NOW: tuple[None, None] = (None, None)


def _due_at(
    due_in: Mapping[int, tuple[float, float]] | None,
) -> dict[int, tuple[datetime | None, datetime | None]] | None:
    """(due in, leased for) seconds from now as times; 0: now, not leased."""
    if not due_in:
        return None
    now = datetime.now(UTC)
    return {
        key: (
            now + timedelta(seconds=due) if due else None,
            now + timedelta(seconds=lease) if lease else None,
        )
        for key, (due, lease) in due_in.items()
    }


# Ordered deliveries from dispatch by COPY (as new deliveries are: the unnest INSERT below
# stored 2,700 a second, a third of the drain's pace), their queue rows too; the INSERT when
# COPY is refused (an event stored before).
ORDERED_DELIVERY_COLUMNS = (*DELIVERY_COLUMNS, "order_key", "order_seq")
ORDERED_DELIVERY_COPY_TYPES = (*DELIVERY_COPY_TYPES, "text", "int8")
ORDERED_QUEUE_COLUMNS = ("subscription_id", "order_key", "order_seq", "delivery_id", "log_time")
ORDERED_QUEUE_COPY_TYPES = ("uuid", "text", "int8", "uuid", "timestamptz")


async def _store_ordered(
    connection: AsyncConnection,
    jobs: Sequence[DeliveryJob],
    now: datetime,
    filed: Callable[[datetime], datetime],
) -> None:
    """Ordered deliveries from dispatch, stored pending (not due: `next_attempt_at` null) and
    queued under their keys."""
    rows = [ordered_row(job, now, filed(job.event_time)) for job in jobs]
    try:
        async with connection.begin_nested():
            await _copy(
                connection,
                "deliveries",
                ORDERED_DELIVERY_COLUMNS,
                ORDERED_DELIVERY_COPY_TYPES,
                rows,
            )
            await _copy(
                connection,
                "ordered_pending",
                ORDERED_QUEUE_COLUMNS,
                ORDERED_QUEUE_COPY_TYPES,
                [
                    (job.subscription_id, job.order_key, job.order_seq, job.delivery_id, row[-3])
                    for job, row in zip(jobs, rows, strict=True)
                ],
            )
            return
    except psycopg.errors.IntegrityError:
        pass  # one of them was stored before: row by row, keeping the first
    await connection.execute(
        _INSERT_ORDERED,
        {
            "id": [job.delivery_id for job in jobs],
            "subscription_id": [job.subscription_id for job in jobs],
            "event_id": [job.event_id for job in jobs],
            "event_type": [job.event_type for job in jobs],
            "payload": [job.payload_json.decode() for job in jobs],
            "event_time": [
                job.event_time if job.event_time.tzinfo else job.event_time.replace(tzinfo=UTC)
                for job in jobs
            ],
            "traceparent": [job.traceparent for job in jobs],
            "tracestate": [job.tracestate for job in jobs],
            "log_time": [filed(job.event_time) for job in jobs],
            "order_key": [job.order_key for job in jobs],
            "order_seq": [job.order_seq for job in jobs],
            "created_at": now,
        },
    )


async def _advance_ordered(
    connection: AsyncConnection, results: Sequence[tuple[AttemptResult, NextStep]]
) -> None:
    """Ordered deliveries attempted: a failed head holds its key (from its first failure); a
    head that succeeded or gave up leaves the queue, and the deliveries it held are marked
    (`held_by`, `held_since`, `held_until`) and named in one log line."""
    blocked = [(r, step) for r, step in results if step.status == DeliveryStatus.PENDING]
    done = [(r, step) for r, step in results if step.status != DeliveryStatus.PENDING]
    if blocked:
        await connection.execute(
            _BLOCK_ORDERED,
            {
                "subscription_id": [r.job.subscription_id for r, _ in blocked],
                "order_key": [r.job.order_key for r, _ in blocked],
                "order_seq": [r.job.order_seq for r, _ in blocked],
                "at": [r.attempted_at for r, _ in blocked],
            },
        )
    if not done:
        return
    keys = {
        "subscription_id": [r.job.subscription_id for r, _ in done],
        "order_key": [r.job.order_key for r, _ in done],
        "order_seq": [r.job.order_seq for r, _ in done],
    }
    holders = (await connection.execute(_HOLDERS, keys)).all()
    held = (
        []
        if not holders
        else (
            await connection.execute(
                _MARK_HELD,
                {
                    "subscription_id": [row.subscription_id for row in holders],
                    "order_key": [row.order_key for row in holders],
                    "order_seq": [row.order_seq for row in holders],
                    "head": [row.delivery_id for row in holders],
                    "since": [row.blocked_since for row in holders],
                },
            )
        ).all()
    )
    await connection.execute(_DONE_ORDERED, keys)
    by_head: dict[uuid.UUID, list[Any]] = {}
    for row in held:
        by_head.setdefault(row.head, []).append(row)
    outcome = {r.job.delivery_id: step.status for r, step in done}
    released_at = datetime.now(UTC)
    for holder in holders:
        behind = by_head.get(holder.delivery_id, [])
        logger.info(
            "ordered key's head is done; the deliveries it held go on",
            subscription_id=str(holder.subscription_id),
            order_key=holder.order_key,
            delivery_id=str(holder.delivery_id),
            outcome=str(outcome.get(holder.delivery_id, "")),
            held_seconds=round((released_at - holder.blocked_since).total_seconds(), 3),
            held_count=len(behind),
            # Bounded: each delivery's page names its holder and its wait.
            held_ids=[str(row.id) for row in behind[:HELD_IDS_LOGGED]],
        )


async def _copy(
    connection: AsyncConnection,
    table: str,
    columns: Sequence[str],
    types: Sequence[str],
    rows: Sequence[Sequence[Any]],
) -> None:
    """COPY rows in, binary (values adapted in psycopg's C code, not item by item as array
    parameters are; binary because text formats each timestamp through `isoformat`: 3 µs a
    value, 15 of a delivery row's 20, against 2 for the whole row in binary)."""
    if not rows:
        return
    raw = await connection.get_raw_connection()
    driver: psycopg.AsyncConnection[Any] = raw.driver_connection  # type: ignore[assignment]
    statement = f"COPY {table} ({', '.join(columns)}) FROM STDIN (FORMAT BINARY)"
    async with driver.cursor() as cursor, cursor.copy(statement) as copy:
        copy.set_types(types)
        for row in rows:
            await copy.write_row(row)


async def _lock_subscriptions(
    connection: AsyncConnection, subscription_ids: Set[uuid.UUID]
) -> set[uuid.UUID]:
    """`LOCK_SUBSCRIPTIONS`: those of `subscription_ids` that exist, locked."""
    if not subscription_ids:
        return set()
    ids = "{" + ",".join(sorted(s.hex for s in subscription_ids)) + "}"
    return set((await connection.execute(LOCK_SUBSCRIPTIONS, {"ids": ids})).scalars())


async def _tally_subscriptions(
    session: AsyncSession, tallies: dict[uuid.UUID, SubscriptionTally], settings: Settings
) -> tuple[list[uuid.UUID], set[uuid.UUID]]:
    """Each subscription's consecutive failures and last success (`tallies`); disables those
    that reach the threshold (or answered 410 Gone). Returns the ids disabled, and the ids
    that exist (their rows now locked by the UPDATE until the transaction ends)."""
    connection = await session.connection()
    to_disable: dict[uuid.UUID, str] = {}
    live: set[uuid.UUID] = set()
    for sub_id, entry in sorted(tallies.items()):
        row = (
            await connection.execute(
                _UPDATE_SUBSCRIPTION,
                {
                    "id": sub_id,
                    "reset": entry.reset,
                    "failures": entry.failures,
                    "last_success": entry.last_success,
                },
            )
        ).first()
        if row is None:
            continue
        live.add(sub_id)
        if not row.is_active:
            continue
        reason = disable_reason(
            gone=entry.gone, failure_count=row.failure_count, threshold=settings.failure_threshold
        )
        if reason is not None:
            to_disable[sub_id] = reason
    for sub_id, reason in to_disable.items():
        await disable_subscription(session, sub_id, reason)
    return list(to_disable), live


_NO_SUBSCRIPTION = "00000000-0000-0000-0000-000000000000"


@dataclass(frozen=True)
class OrderedClaim:
    """What one ordered claim leased (`CLAIM_ORDERED`'s rows, in key and sequence order) and
    how its scan went: keys scanned, the last of them (where the next claim goes on), and
    heads beyond the watermark (events still being stored, or stored but not acknowledged)."""

    rows: list[Any]
    scanned: int
    last: tuple[str, str] | None
    beyond: int


class DeliveryStore:
    """The worker's store: the session factory its transactions come from, and dispatch's
    own connection (psycopg's, autocommit, for `MATCHING`). Built once per worker."""

    def __init__(
        self, session_factory: async_sessionmaker[AsyncSession], settings: Settings
    ) -> None:
        self._session_factory = session_factory
        self._settings = settings
        self._url = to_libpq_url(settings.database_url)
        self._connection: psycopg.AsyncConnection[tuple[Any, ...]] | None = None
        self._claims: psycopg.AsyncConnection[Any] | None = None
        self._ordered_claims: psycopg.AsyncConnection[Any] | None = None

    def due_listener(self, poll_seconds: float) -> NotifyListener:
        """Woken by `NOTIFY` on the deliveries' channel (new due deliveries), and every
        `poll_seconds` regardless."""
        return NotifyListener(
            self._settings.database_url, DELIVERIES_CHANNEL, poll_seconds=poll_seconds
        )

    # --- dispatch --------------------------------------------------------------------------

    async def matching_existing(self, events: Sequence[RawCloudEvent]) -> list[tuple[Any, ...]]:
        """`MATCHING`'s rows for a batch of events: the active subscriptions to any of their
        types, each with the batch's personal types and the (subscription, event) pairs
        stored already.

        A failed read (a database restart) fails one batch, which comes back after the
        dispatch loop's retry delay, and the connection is replaced on the next read."""
        types = sorted({event.type for event in events} | {"*"})
        # One array literal, not a list psycopg would adapt item by item (the hot path); the
        # ids in hex without hyphens, which PostgreSQL reads as well (`hex` costs a third of
        # `str`).
        event_ids = "{" + ",".join(event.id.hex for event in events) + "}"
        # Each event's partition key as its deliveries are written (the same for every copy
        # of it), so the probe for those stored is of one partition.
        filed = self._settings.delivery_log_layout.filing(datetime.now(UTC))
        log_times = "{" + ",".join(filed(event.time).isoformat() for event in events) + "}"
        connection = self._connection
        if connection is None or connection.closed or connection.broken:
            connection = await psycopg.AsyncConnection.connect(self._url, autocommit=True)
            self._connection = connection
        try:
            cursor = await connection.execute(
                MATCHING,
                {"types": types, "event_ids": event_ids, "log_times": log_times},
                prepare=True,
            )
            return await cursor.fetchall()
        except psycopg.Error:
            # Any failure starts afresh: not only a lost connection, also a prepared plan a
            # migration made stale ("cached plan must not change result type").
            self._connection = None
            await connection.close()
            raise

    async def close(self) -> None:
        if self._connection is not None:
            await self._connection.close()
            self._connection = None
        if self._claims is not None:
            await self._claims.close()
            self._claims = None
        if self._ordered_claims is not None:
            await self._ordered_claims.close()
            self._ordered_claims = None

    async def _claiming(self) -> psycopg.AsyncConnection[Any]:
        """The claim loop's own connection (made again after a failure)."""
        connection = self._claims
        if connection is None or connection.closed or connection.broken:
            connection = await psycopg.AsyncConnection.connect(
                self._url, autocommit=True, row_factory=namedtuple_row
            )
            # A lease lost to a database crash only means the delivery is sent again sooner
            # (same webhook-id), so claims need not wait for the WAL flush.
            await connection.execute("SET synchronous_commit = off")
            self._claims = connection
        return connection

    async def _claiming_in_order(self) -> psycopg.AsyncConnection[Any]:
        """The ordered claim's own connection, committing durably (unlike `_claiming`'s): a
        lease lost to a database crash would let a second worker take a key whose run is
        still going out from the first, out of order."""
        connection = self._ordered_claims
        if connection is None or connection.closed or connection.broken:
            connection = await psycopg.AsyncConnection.connect(
                self._url, autocommit=True, row_factory=namedtuple_row
            )
            self._ordered_claims = connection
        return connection

    # --- the claim loop --------------------------------------------------------------------

    async def claim(
        self,
        *,
        held: Sequence[str] = (),
        probing: Sequence[str] = (),
        saturated: Sequence[str],
        saturated_owners: Sequence[str],
        per_subscription: int,
        per_owner: int,
        limit: int,
        lease_extra: float,
    ) -> tuple[list[Any], bool]:
        """Lease up to `limit` due deliveries, at most `per_subscription` and `per_owner` of
        each, none of the `saturated` subscriptions' or owners' nor of those `held` by their
        breaker; and the probe (`CLAIM_PROBES`) of each `probing` one. Returns the claimed rows
        (named tuples of `CLAIM`'s columns) and, when fewer than `limit` came back and some were excluded,
        whether the excluded have due deliveries."""
        connection = await self._claiming()
        try:
            cursor = await connection.execute(
                CLAIM,
                {
                    "excluded": [*saturated, *held, *probing],
                    "saturated_owners": saturated_owners,
                    "per_subscription": per_subscription,
                    "per_owner": per_owner,
                    "limit": limit,
                    "scan": limit * 4,
                    "lease_extra": lease_extra,
                    "timeout": self._settings.delivery_timeout_seconds,
                },
                prepare=True,
            )
            rows = await cursor.fetchall()
            if probing:
                cursor = await connection.execute(
                    CLAIM_PROBES,
                    {
                        "probing": probing,
                        "lease_extra": lease_extra,
                        "timeout": self._settings.delivery_timeout_seconds,
                    },
                    prepare=True,
                )
                rows += await cursor.fetchall()
            excluded_due = False
            if len(rows) < limit and (saturated or saturated_owners):
                cursor = await connection.execute(
                    EXCLUDED_DUE,
                    {"saturated": saturated, "saturated_owners": saturated_owners},
                    prepare=True,
                )
                found = await cursor.fetchone()
                excluded_due = bool(found and found[0])
        except psycopg.Error:
            # Any failure starts afresh, as dispatch's connection does.
            self._claims = None
            await connection.close()
            raise
        return rows, excluded_due

    async def claim_ordered(
        self,
        *,
        watermark: int,
        after: tuple[str, str] | None,
        excluded: Sequence[str],
        saturated_owners: Sequence[str],
        per_subscription: int,
        per_owner: int,
        limit: int,
        run: int,
        scan: int,
        lease_extra: float,
    ) -> OrderedClaim:
        """`CLAIM_ORDERED`: the runs of up to `limit` keys whose heads are free, due and at or
        below `watermark`, scanning at most `scan` keys after `after` (None: from the first)."""
        connection = await self._claiming_in_order()
        subscription, key = after or (_NO_SUBSCRIPTION, "")
        try:
            cursor = await connection.execute(
                CLAIM_ORDERED,
                {
                    "after_subscription": subscription,
                    "after_key": key,
                    "watermark": watermark,
                    "excluded": list(excluded),
                    "saturated_owners": list(saturated_owners),
                    "per_subscription": per_subscription,
                    "per_owner": per_owner,
                    "limit": limit,
                    "run": run,
                    "scan": scan,
                    "lease_extra": lease_extra,
                    "timeout": self._settings.delivery_timeout_seconds,
                },
                prepare=True,
            )
            rows = await cursor.fetchall()
        except psycopg.Error:
            self._ordered_claims = None
            await connection.close()
            raise
        last = rows[0] if rows else None
        return OrderedClaim(
            rows=[row for row in rows if row.id is not None],
            scanned=int(last.scanned) if last else 0,
            last=(str(last.last_subscription), last.last_key)
            if last and last.last_subscription is not None
            else None,
            beyond=int(last.beyond) if last else 0,
        )

    async def fail_unreadable(self, reasons: dict[str, str]) -> None:
        """Fail claimed deliveries that cannot be made into jobs, each with its reason."""
        async with self._session_factory() as session, session.begin():
            connection = await session.connection()
            await connection.execute(
                _FAIL_UNREADABLE, {"ids": list(reasons), "errors": list(reasons.values())}
            )

    # --- recording -------------------------------------------------------------------------

    async def record(
        self,
        results: Sequence[AttemptResult],
        aside: Sequence[DeliveryJob],
        due_in: Mapping[int, tuple[float, float]] | None = None,
        resumed: Set[uuid.UUID] = frozenset(),
    ) -> list[uuid.UUID]:
        """One transaction: `results` recorded (`DeliveryWrites.record_outcomes`), the
        deliveries set aside stored as pending (new ones) or released (claimed ones); those
        in `due_in` (by the id's `int`) due and leased for so many seconds; the `resumed` subscriptions'
        pending deliveries due now (after the held ones are stored). Returns the ids of the
        subscriptions it disabled."""
        async with self._session_factory() as session, session.begin():
            writes = DeliveryWrites(session)
            disabled = await writes.record_outcomes(
                results,
                self._settings,
                [job for job in aside if isinstance(job, FirstAttempt)],
                _due_at(due_in),
            )
            await writes.release(
                [job.delivery_id for job in aside if isinstance(job, StoredDelivery)]
            )
            await writes.resume(resumed)
        return disabled
