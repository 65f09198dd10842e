"""The enforced rate limit per subscription (issue 32, item 2).

`subscriptions` gains `rate_limit_per_second` (null: unlimited) and `rate_limit_burst` (null:
the default, `greatest(1, ceil(rate))`). `subscription_rate_buckets` holds each limited
subscription's token bucket, shared by every worker: the claim reads, spends and refills it in
the statement that leases the subscription's due deliveries (delivery_engine/store.py), so the
limit holds however many workers claim. A row of its own, not columns of `subscriptions`: the
recording transactions update subscription rows (failure tallies) and a claim must not wait
for them. A partial index finds a limited subscription's due deliveries (pending rows only:
first attempts that succeed are never in it).

Revision ID: 0021
Revises: 0020
"""

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


INDEX = "ix_deliveries_pending_subscription"
PENDING_BY_SUBSCRIPTION = "(subscription_id, next_attempt_at) WHERE status = 'pending'"


def upgrade() -> None:
    op.add_column("subscriptions", sa.Column("rate_limit_per_second", sa.Float(), nullable=True))
    op.add_column("subscriptions", sa.Column("rate_limit_burst", sa.Integer(), nullable=True))
    op.create_table(
        "subscription_rate_buckets",
        sa.Column(
            "subscription_id",
            sa.Uuid(),
            sa.ForeignKey("subscriptions.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("tokens", sa.Float(), nullable=False),
        sa.Column("refilled_at", sa.DateTime(timezone=True), nullable=False),
    )
    # Whoever writes a subscription (the API, the portal, NATS, an operator's SQL), its
    # bucket follows: made full when a limit is set, cut to a smaller burst, gone with the
    # limit.
    op.execute(
        """
        CREATE FUNCTION subscription_rate_bucket_follow() RETURNS trigger
        LANGUAGE plpgsql AS $$
        DECLARE
            size double precision;
        BEGIN
            IF NEW.rate_limit_per_second IS NULL THEN
                DELETE FROM subscription_rate_buckets WHERE subscription_id = NEW.id;
                RETURN NULL;
            END IF;
            size := coalesce(NEW.rate_limit_burst, greatest(1, ceil(NEW.rate_limit_per_second)));
            INSERT INTO subscription_rate_buckets (subscription_id, tokens, refilled_at)
            VALUES (NEW.id, size, now())
            ON CONFLICT (subscription_id) DO UPDATE
                SET tokens = least(subscription_rate_buckets.tokens, size);
            RETURN NULL;
        END
        $$
        """
    )
    op.execute(
        "CREATE TRIGGER subscription_rate_bucket_follow"
        " AFTER INSERT OR UPDATE OF rate_limit_per_second, rate_limit_burst ON subscriptions"
        " FOR EACH ROW EXECUTE FUNCTION subscription_rate_bucket_follow()"
    )
    # The index of the partitioned log made without holding off its writers: the parent's
    # alone (invalid until every partition has its own), then each partition's built
    # CONCURRENTLY and attached. Partitions the worker makes later get it as they attach.
    op.execute(f"CREATE INDEX IF NOT EXISTS {INDEX} ON ONLY deliveries {PENDING_BY_SUBSCRIPTION}")
    partitions = list(
        op.get_bind()
        .exec_driver_sql(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
            " WHERE i.inhparent = 'deliveries'::regclass ORDER BY 1"
        )
        .scalars()
    )
    with op.get_context().autocommit_block():
        for partition in partitions:
            name = f"{partition}_pending_subscription"
            # Each may be run again: one a failed build left invalid is built again.
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
            op.execute(f"CREATE INDEX CONCURRENTLY {name} ON {partition} {PENDING_BY_SUBSCRIPTION}")
            op.execute(f"ALTER INDEX {INDEX} ATTACH PARTITION {name}")


def downgrade() -> None:
    op.execute(f"DROP INDEX IF EXISTS {INDEX}")
    op.execute("DROP TRIGGER IF EXISTS subscription_rate_bucket_follow ON subscriptions")
    op.execute("DROP FUNCTION IF EXISTS subscription_rate_bucket_follow()")
    op.drop_table("subscription_rate_buckets")
    op.drop_column("subscriptions", "rate_limit_burst")
    op.drop_column("subscriptions", "rate_limit_per_second")
