"""The delivery log partitioned by time: `deliveries` by `log_time`, `delivery_attempts` by
`attempted_at` (RANGE), so the worker drops whole partitions past the retention instead of
deleting rows (partitions.py, maintenance.py).

No row is copied, and no long lock is held. The existing tables become the first partition
of each new table, `<table>_legacy`, from MINVALUE to `B` (a whole minute a few minutes
ahead, past any row written meanwhile):

1. `deliveries` gains `log_time`, NOT NULL with the constant default `-infinity` (stored in
   the catalog, no rewrite): every row there now files under the legacy partition. The foreign
   key of `delivery_attempts` to `deliveries` goes (a key referencing a partitioned table must
   contain its partition key; the trigger below deletes a subscription's attempts with its
   deliveries, and partitions go by time).
2. The unique indexes the partitioned tables need, (id, log_time), (event_id,
   subscription_id, log_time) and (id, attempted_at), are built CONCURRENTLY on the live
   tables, and the hour rollup gets an index on `hour_start` for its own pruning.
3. A CHECK of the range (`< B`) is added NOT VALID, then validated (a scan that holds off no
   writes), so that ATTACH needs no scan of its own.
4. One short transaction: the tables renamed `*_legacy`, their primary keys swapped for the
   unique indexes of step 2, the partitioned tables created, the legacy ones attached.

Writers of the release before must be stopped first: their fallback `INSERT ... ON CONFLICT
(subscription_id, event_id)` has no constraint to infer once the tables are swapped. The
partitions after `B` are the worker's (its maintenance creates them at start).

Downgrade copies the rows into plain tables of 0019's shape (one INSERT per table, writes
held off by a SHARE lock meanwhile; a delivery filed twice under two keys is kept once) and
drops the partitioned ones: it works whatever partitions exist.

Revision ID: 0020
Revises: 0019
"""

from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

# Rows written between the range's CHECK and the swap must be below `B`: a whole minute this
# far ahead.
MARGIN = "5 minutes"

DELIVERY_COLUMNS = """
    id uuid NOT NULL,
    subscription_id uuid NOT NULL,
    event_id uuid NOT NULL,
    event_type varchar(200) NOT NULL,
    payload json NOT NULL,
    event_time timestamptz NOT NULL,
    status varchar(16) NOT NULL,
    attempts integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz,
    lease_until timestamptz,
    last_attempt_at timestamptz,
    last_status_code integer,
    last_error text,
    created_at timestamptz NOT NULL,
    completed_at timestamptz,
    traceparent varchar(55),
    tracestate text,
    first_status_code integer,
    first_response_body text,
    first_duration_ms integer,
    first_error text
"""
COPIED_DELIVERY_COLUMNS = (
    "id, subscription_id, event_id, event_type, payload, event_time, status, attempts,"
    " next_attempt_at, lease_until, last_attempt_at, last_status_code, last_error, created_at,"
    " completed_at, traceparent, tracestate, first_status_code, first_response_body,"
    " first_duration_ms, first_error"
)
STATUS_CHECK = "CHECK (status IN ('pending', 'succeeded', 'failed'))"
ATTEMPT_COLUMNS = """
    id uuid NOT NULL DEFAULT gen_random_uuid(),
    delivery_id uuid NOT NULL,
    attempted_at timestamptz NOT NULL,
    status_code integer,
    response_body text,
    duration_ms integer NOT NULL,
    error text
"""
COPIED_ATTEMPT_COLUMNS = (
    "id, delivery_id, attempted_at, status_code, response_body, duration_ms, error"
)
DUE = "(next_attempt_at) WHERE status = 'pending'"
TIMING = "(subscription_id, created_at, id) INCLUDE (status, first_duration_ms)"
ATTEMPT_TIMING = "(delivery_id) INCLUDE (attempted_at, duration_ms)"

# 0015's, and the attempts of those deliveries too (no foreign key cascades them any more).
DELETE_WITH_SUBSCRIPTION = """
    CREATE OR REPLACE FUNCTION delete_deliveries_of_subscription() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
    BEGIN
        WITH gone AS (DELETE FROM deliveries WHERE subscription_id = OLD.id RETURNING id)
        DELETE FROM delivery_attempts a USING gone WHERE a.delivery_id = gone.id;
        RETURN NULL;
    END
    $$
"""
DELETE_WITH_SUBSCRIPTION_0015 = """
    CREATE OR REPLACE FUNCTION delete_deliveries_of_subscription() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
    BEGIN
        DELETE FROM deliveries WHERE subscription_id = OLD.id;
        RETURN NULL;
    END
    $$
"""


def upgrade() -> None:
    op.execute(
        "ALTER TABLE deliveries ADD COLUMN IF NOT EXISTS log_time timestamptz NOT NULL"
        " DEFAULT '-infinity'"
    )
    op.execute(
        "ALTER TABLE delivery_attempts DROP CONSTRAINT IF EXISTS delivery_attempts_delivery_id_fkey"
    )
    with op.get_context().autocommit_block():
        # Each may be run again: one a failed build left invalid is built again.
        for name, unique, on in (
            ("deliveries_legacy_pkey", "UNIQUE", "deliveries (id, log_time)"),
            (
                "deliveries_legacy_event_subscription_log_time",
                "UNIQUE",
                "deliveries (event_id, subscription_id, log_time)",
            ),
            ("delivery_attempts_legacy_pkey", "UNIQUE", "delivery_attempts (id, attempted_at)"),
            ("ix_delivery_hour_stats_hour_start", "", "delivery_hour_stats (hour_start)"),
        ):
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
            op.execute(f"CREATE {unique} INDEX CONCURRENTLY {name} ON {on}")
    bind = op.get_bind()
    upper = bind.exec_driver_sql(
        f"SELECT date_trunc('minute', now()) + interval '{MARGIN}'"
    ).scalar_one()
    bound = f"'{upper.isoformat()}'"
    op.execute(
        f"ALTER TABLE deliveries ADD CONSTRAINT deliveries_legacy_range"
        f" CHECK (log_time < {bound}) NOT VALID"
    )
    op.execute(
        f"ALTER TABLE delivery_attempts ADD CONSTRAINT delivery_attempts_legacy_range"
        f" CHECK (attempted_at < {bound}) NOT VALID"
    )
    with op.get_context().autocommit_block():
        # Each its own transaction: the scan holds SHARE UPDATE EXCLUSIVE, which writes pass.
        op.execute("ALTER TABLE deliveries VALIDATE CONSTRAINT deliveries_legacy_range")
        op.execute(
            "ALTER TABLE delivery_attempts VALIDATE CONSTRAINT delivery_attempts_legacy_range"
        )
    # The swap: catalog changes only, under the tables' exclusive locks for milliseconds.
    op.execute("ALTER TABLE deliveries RENAME TO deliveries_legacy")
    op.execute(
        "ALTER TABLE deliveries_legacy DROP CONSTRAINT deliveries_pkey,"
        " DROP CONSTRAINT uq_deliveries_event_subscription,"
        " ADD CONSTRAINT deliveries_legacy_pkey PRIMARY KEY USING INDEX deliveries_legacy_pkey"
    )
    op.execute("ALTER TABLE delivery_attempts RENAME TO delivery_attempts_legacy")
    op.execute(
        "ALTER TABLE delivery_attempts_legacy DROP CONSTRAINT delivery_attempts_pkey,"
        " ADD CONSTRAINT delivery_attempts_legacy_pkey PRIMARY KEY"
        " USING INDEX delivery_attempts_legacy_pkey"
    )
    for index in ("ix_deliveries_due", "ix_deliveries_subscription_created_timing"):
        op.execute(
            f"ALTER INDEX {index} RENAME TO {index.replace('deliveries', 'deliveries_legacy')}"
        )
    op.execute(
        "ALTER INDEX ix_delivery_attempts_delivery_timing"
        " RENAME TO ix_delivery_attempts_legacy_delivery_timing"
    )
    # A row written without a key (a release before's COPY, an operator's INSERT) files
    # under the moment it is written.
    op.execute(
        f"CREATE TABLE deliveries ({DELIVERY_COLUMNS},"
        " log_time timestamptz NOT NULL DEFAULT now(),"
        f" CONSTRAINT ck_deliveries_status {STATUS_CHECK},"
        " CONSTRAINT deliveries_pkey PRIMARY KEY (id, log_time))"
        " PARTITION BY RANGE (log_time)"
    )
    op.execute(
        "CREATE UNIQUE INDEX uq_deliveries_event_subscription_log_time"
        " ON deliveries (event_id, subscription_id, log_time)"
    )
    op.execute(f"CREATE INDEX ix_deliveries_due ON deliveries {DUE}")
    op.execute(f"CREATE INDEX ix_deliveries_subscription_created_timing ON deliveries {TIMING}")
    op.execute(
        f"CREATE TABLE delivery_attempts ({ATTEMPT_COLUMNS},"
        " CONSTRAINT delivery_attempts_pkey PRIMARY KEY (id, attempted_at))"
        " PARTITION BY RANGE (attempted_at)"
    )
    op.execute(
        f"CREATE INDEX ix_delivery_attempts_delivery_timing ON delivery_attempts {ATTEMPT_TIMING}"
    )
    # The validated CHECKs prove the ranges: ATTACH scans nothing, and adopts the indexes.
    op.execute(
        f"ALTER TABLE deliveries ATTACH PARTITION deliveries_legacy"
        f" FOR VALUES FROM (MINVALUE) TO ({bound})"
    )
    op.execute(
        f"ALTER TABLE delivery_attempts ATTACH PARTITION delivery_attempts_legacy"
        f" FOR VALUES FROM (MINVALUE) TO ({bound})"
    )
    op.execute("ALTER TABLE deliveries_legacy DROP CONSTRAINT deliveries_legacy_range")
    op.execute(
        "ALTER TABLE delivery_attempts_legacy DROP CONSTRAINT delivery_attempts_legacy_range"
    )
    op.execute(DELETE_WITH_SUBSCRIPTION)


def downgrade() -> None:
    op.execute("LOCK TABLE deliveries, delivery_attempts IN SHARE MODE")
    op.execute(
        f"CREATE TABLE deliveries_plain ({DELIVERY_COLUMNS},"
        f" CONSTRAINT deliveries_plain_status {STATUS_CHECK},"
        " CONSTRAINT deliveries_plain_pkey PRIMARY KEY (id),"
        " CONSTRAINT deliveries_plain_event_subscription UNIQUE (event_id, subscription_id))"
    )
    # Oldest key first: a delivery filed under two keys (a copy of its event that came as
    # its first row was moved) is kept as first filed.
    op.execute(
        f"INSERT INTO deliveries_plain ({COPIED_DELIVERY_COLUMNS})"  # noqa: S608 (constants)
        f" SELECT {COPIED_DELIVERY_COLUMNS} FROM deliveries ORDER BY log_time"
        " ON CONFLICT DO NOTHING"
    )
    op.execute(f"CREATE TABLE delivery_attempts_plain ({ATTEMPT_COLUMNS})")
    # Attempts of deliveries no longer in the log (their partition dropped first) would fail
    # the foreign key 0019 has.
    op.execute(
        f"INSERT INTO delivery_attempts_plain ({COPIED_ATTEMPT_COLUMNS})"  # noqa: S608 (constants)
        f" SELECT {COPIED_ATTEMPT_COLUMNS} FROM delivery_attempts a"
        " WHERE EXISTS (SELECT 1 FROM deliveries_plain d WHERE d.id = a.delivery_id)"
    )
    op.execute("DROP TABLE deliveries, delivery_attempts")
    # Partitions detached and not dropped yet (a maintenance round cut off): gone too.
    op.execute(
        """
        DO $$
        DECLARE t text;
        BEGIN
            FOR t IN SELECT relname FROM pg_class
                     WHERE relkind = 'r' AND relnamespace = current_schema()::regnamespace
                       AND relname ~ '^(deliveries|delivery_attempts)_(p[0-9]{8}_[0-9]{4}|legacy)$'
            LOOP
                EXECUTE format('DROP TABLE %I', t);
            END LOOP;
        END
        $$
        """
    )
    op.execute("ALTER TABLE deliveries_plain RENAME TO deliveries")
    op.execute("ALTER TABLE deliveries RENAME CONSTRAINT deliveries_plain_pkey TO deliveries_pkey")
    op.execute(
        "ALTER TABLE deliveries RENAME CONSTRAINT deliveries_plain_event_subscription"
        " TO uq_deliveries_event_subscription"
    )
    op.execute(
        "ALTER TABLE deliveries RENAME CONSTRAINT deliveries_plain_status TO ck_deliveries_status"
    )
    op.execute(f"CREATE INDEX ix_deliveries_due ON deliveries {DUE}")
    op.execute(f"CREATE INDEX ix_deliveries_subscription_created_timing ON deliveries {TIMING}")
    op.execute("ALTER TABLE delivery_attempts_plain RENAME TO delivery_attempts")
    op.execute("ALTER TABLE delivery_attempts ADD PRIMARY KEY (id)")
    op.execute(
        f"CREATE INDEX ix_delivery_attempts_delivery_timing ON delivery_attempts {ATTEMPT_TIMING}"
    )
    op.execute(
        "ALTER TABLE delivery_attempts ADD CONSTRAINT delivery_attempts_delivery_id_fkey"
        " FOREIGN KEY (delivery_id) REFERENCES deliveries (id) ON DELETE CASCADE"
    )
    op.execute(DELETE_WITH_SUBSCRIPTION_0015)
    op.execute("DROP INDEX IF EXISTS ix_delivery_hour_stats_hour_start")
