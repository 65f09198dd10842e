"""An event's first attempt is stored in its delivery's row, not as a row of its own.

The engine writes a delivery row when its event's first attempt ends (in the state the
attempt left it). That attempt's figures now go in the same row (`first_status_code`,
`first_response_body`, `first_duration_ms`, `first_error`; it started at `created_at`), so
a delivery that succeeds at once costs one row and its indexes instead of two rows, four
index entries and a foreign-key check. Measured on the embedded PostgreSQL, COPYing batches
of 1,000 first-attempt successes: 32 to 33 µs of the server's CPU per delivery with the
attempt row, 19 to 21 without. Later attempts (retries, manual ones, and the first attempt
of a delivery set aside before it was tried) keep their rows in `delivery_attempts`; readers
take both (`DeliveryRepository.attempts_of`, the portal's latency figures).

Rows stored before this keep their first attempt in `delivery_attempts` (the new columns are
null): nothing is moved. The covering index of the delivery log gains `first_duration_ms`,
so the latency chart still reads an index only; it is built and the old one dropped
concurrently, so the workers of the release before keep writing meanwhile.

A release before this one reads attempts from `delivery_attempts` only: going back to it
needs `migrate --downgrade-to 0013` first, which moves the first attempts back into the log
and forgets the charts' stored hours since the first delivery that held one.

Revision ID: 0014
Revises: 0013
"""

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Each step may be run again: the index is built outside the transaction, so a failure
    # there leaves the columns committed and the revision not recorded.
    op.execute(
        "ALTER TABLE deliveries ADD COLUMN IF NOT EXISTS first_status_code integer,"
        " ADD COLUMN IF NOT EXISTS first_response_body text,"
        " ADD COLUMN IF NOT EXISTS first_duration_ms integer,"
        " ADD COLUMN IF NOT EXISTS first_error text"
    )
    with op.get_context().autocommit_block():
        # One a failed build left invalid is built again.
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS ix_deliveries_subscription_created_timing")
        op.execute(
            "CREATE INDEX CONCURRENTLY ix_deliveries_subscription_created_timing"
            " ON deliveries (subscription_id, created_at, id)"
            " INCLUDE (status, first_duration_ms)"
        )
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS ix_deliveries_subscription_created_status")


def downgrade() -> None:
    # Hours stored from figures that included first attempts held in rows: computed again
    # by the release this goes back to, from the log it reads.
    op.execute(
        """
        DELETE FROM delivery_hour_stats h
        USING (
            SELECT subscription_id, min(created_at) AS since
            FROM deliveries WHERE first_duration_ms IS NOT NULL GROUP BY subscription_id
        ) AS f
        WHERE h.subscription_id = f.subscription_id AND h.hour_start > f.since - interval '1 hour'
        """
    )
    # The inline first attempts become rows again before their columns go.
    op.execute(
        """
        INSERT INTO delivery_attempts
            (id, delivery_id, attempted_at, status_code, response_body, duration_ms, error)
        SELECT gen_random_uuid(), id, created_at, first_status_code, first_response_body,
               first_duration_ms, first_error
        FROM deliveries WHERE first_duration_ms IS NOT NULL
        """
    )
    op.create_index(
        "ix_deliveries_subscription_created_status",
        "deliveries",
        ["subscription_id", "created_at", "id"],
        postgresql_include=["status"],
    )
    op.drop_index("ix_deliveries_subscription_created_timing", "deliveries")
    for column in ("first_error", "first_duration_ms", "first_response_body", "first_status_code"):
        op.drop_column("deliveries", column)
