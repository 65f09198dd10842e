"""Settings of webhook-hub, read from `WEBHOOK_HUB_*` (bare `DATABASE_URL`, `NATS_URL`,
`SMTP_URL` as fall-backs)."""

from datetime import timedelta
from pathlib import Path
from typing import Annotated, ClassVar

from fastapi import Depends, Request
from pydantic import BeforeValidator, Field, PlainSerializer
from pydantic_settings import SettingsConfigDict
from servicekit.live import LiveStreamSettings
from servicekit.web.pages import PageSettings

from webhook_hub.partitions import Layout, format_width, parse_width

# A duration written as `1d`, `6h`, `15m` (partitions.parse_width): anything else is refused
# when the settings are read.
PartitionWidth = Annotated[
    timedelta, BeforeValidator(parse_width), PlainSerializer(format_width, return_type=str)
]

# 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h: the schedule Svix publishes, about 28 h in all.
DEFAULT_RETRY_SCHEDULE = [5.0, 300.0, 1800.0, 7200.0, 18000.0, 36000.0, 36000.0]


class Settings(PageSettings, LiveStreamSettings):
    model_config = SettingsConfigDict(env_prefix="WEBHOOK_HUB_")
    service_name: ClassVar[str] = "webhook-hub"

    port: int = 8001
    database_url: str = "postgresql://postgres@127.0.0.1:15432/webhook_hub"
    api_key_prefix: str = "whk"
    # A key found active is remembered for this long by each API process: a key revoked by
    # another process (a replica, the CLI) keeps working here that long at most (README).
    api_key_cache_seconds: float = Field(default=5.0, ge=0)
    max_request_body_bytes: int = 256 * 1024

    retry_schedule_seconds: list[float] = Field(default_factory=lambda: DEFAULT_RETRY_SCHEDULE)
    retry_jitter: float = 0.2
    # The timeout of a subscription whose owner sets no default either (the spec's 10 s).
    delivery_timeout_seconds: int = Field(default=10, ge=1, le=30)
    retry_after_cap_seconds: float = 86400.0
    failure_threshold: int = 100
    # Circuit breaker (decisions.py): after this many failed attempts in a row a worker holds
    # the subscription's deliveries and lets one probe through, the first after
    # `circuit_probe_seconds`, the wait doubling up to `circuit_probe_max_seconds`.
    circuit_breaker_failures: int = Field(default=10, ge=1)
    circuit_probe_seconds: float = Field(default=1.0, gt=0)
    circuit_probe_max_seconds: float = Field(default=10.0, gt=0)
    secret_transition_seconds: int = 600
    per_subscription_concurrency: int = 64
    # How often a worker writes what CEL filters/transforms did (dispatch/expression_tally.py).
    expression_tally_seconds: float = Field(default=5.0, gt=0)
    delivery_concurrency: int = 512
    # Slots are shared equally between the owners with work in a worker, each getting at
    # least this many; this many also stay free for an owner who turns up (see admission.py).
    owner_concurrency_floor: int = Field(default=16, ge=1)
    # Subscriptions one owner may have (the spec's design target); beyond it, a 409.
    max_subscriptions_per_owner: int = Field(default=10_000, ge=1)
    delivery_claim_batch: int = 1000
    delivery_poll_seconds: float = 1.0
    # A claimed delivery is leased for twice its timeout plus this; after a crash it is
    # claimed again (same webhook-id) once the lease runs out.
    delivery_lease_extra_seconds: float = 30.0
    response_body_limit: int = 4096
    # Connecting to an endpoint may take this long (within the subscription's total timeout).
    delivery_connect_timeout_seconds: float = 5.0
    # A PEM file of CA certificates deliveries trust besides the system's (an operator's
    # private CA); empty: the system's alone.
    delivery_ca_file: str = ""
    dispatch_batch_size: int = 500
    # An event is acknowledged once its deliveries are stored; until then JetStream holds it
    # for this long (kept alive while a slow endpoint answers), then hands it out again.
    dispatch_ack_wait_seconds: float = 30.0
    # Deliveries of new events waiting for a slot of their subscription: above this many,
    # dispatch fetches nothing more; one that waits longer than the seconds is stored as
    # pending for the claim loop, so a slow endpoint holds up nobody else's events.
    dispatch_backlog: int = 5000
    dispatch_queue_seconds: float = 2.0
    probe_timeout_seconds: float = 3.0
    # The worker logs its delivery counts (attempted, succeeded, failed, retried) this often.
    delivery_log_interval_seconds: float = Field(default=10.0, gt=0)
    user_agent: str = "webhook-hub/0.1 (+https://www.standardwebhooks.com)"
    # Networks endpoints may resolve to in production despite the SSRF guard (e.g. 10.0.0.0/8).
    allowed_networks: list[str] = Field(default_factory=list)
    # The strict guard (public addresses only) is on in production; tests and development may
    # switch it on explicitly. Off, loopback and private networks are allowed, but cloud
    # metadata and link-local addresses stay refused in every environment.
    ssrf_protection: bool | None = None
    # Concurrent single events of one API process written together, at most this many in a
    # transaction (producer_events/group_commit.py); 1 writes each in its own.
    event_group_commit_max: int = Field(default=500, ge=1, le=500)
    idempotency_window_hours: float = 24.0
    # The worker deletes keys past the window this often (in batches: producer_events/pruning).
    idempotency_prune_seconds: float = Field(default=300.0, gt=0)
    # The delivery log (`deliveries`, `delivery_attempts`) is partitioned by time, this wide,
    # and whole partitions are dropped once past the retention (days; fractions allowed, for
    # a soak run that keeps minutes). The portal charts' hourly rollup is kept longer, pruned
    # on its own. See the README's "Delivery log retention and partitions".
    delivery_partition_width: PartitionWidth = timedelta(days=1)
    delivery_retention_days: float = Field(default=30.0, gt=0)
    delivery_rollup_retention_days: float = Field(default=90.0, gt=0)
    # Where people reach this service (portal links are built on it); empty: the address of
    # the request that asks for a link, or http://127.0.0.1:<port> from the CLI.
    public_url: str = ""

    @property
    def delivery_log_layout(self) -> Layout:
        """How `deliveries` and `delivery_attempts` are partitioned and kept."""
        return Layout(self.delivery_partition_width, timedelta(days=self.delivery_retention_days))

    @property
    def ssrf_guard_enabled(self) -> bool:
        return self.is_production if self.ssrf_protection is None else self.ssrf_protection

    def delivery_ca_certificates(self) -> tuple[bytes, ...]:
        """The PEM bundle `delivery_ca_file` names, for every client that reaches endpoints
        (deliveries and the creation probe); OSError when it cannot be read."""
        if not self.delivery_ca_file:
            return ()
        return (Path(self.delivery_ca_file).read_bytes(),)


# `async def`: FastAPI runs a plain `def` dependency in its thread pool, a hand-off per request
# that cost the single-event endpoint more than the dependency itself.
async def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


# What endpoints take to read the app's settings.
SettingsDep = Annotated[Settings, Depends(get_settings)]
