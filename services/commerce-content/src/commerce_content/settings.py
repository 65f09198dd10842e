"""Settings of commerce-content, read from `COMMERCE_CONTENT_*` (bare `DATABASE_URL`,
`NATS_URL`, `SMTP_URL` as fall-backs). The names outside parties rely on are fixed by
ARCHITECTURE.md."""

from typing import Annotated, ClassVar, Literal, Self

from fastapi import Depends, Request
from pydantic import Field, SecretStr, model_validator
from pydantic_settings import SettingsConfigDict
from servicekit.settings import ServiceSettings


class Settings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="COMMERCE_CONTENT_")
    service_name: ClassVar[str] = "commerce-content"

    port: int = 8003
    database_url: str = "postgresql://postgres@127.0.0.1:15432/commerce_content"
    api_key_prefix: str = "cck"

    jwt_secret: SecretStr = SecretStr("dev-insecure-commerce-jwt-secret-0123456789")
    # Checked (and put in issued tokens) only when set: the spec's contract is HS256 with the
    # secret and `sub`, so tokens from other HS256 libraries work unless the operator asks more.
    jwt_issuer: str | None = None
    jwt_audience: str | None = None
    jwt_ttl_seconds: int = 3600

    frontend_url: str = "http://localhost:5173"
    frontend_origin: str = "http://localhost:5173"
    content_api_key: SecretStr = SecretStr("dev-insecure-content-api-key")
    content_webhook_url: str | None = None
    # Signs content-saved notifications (Standard Webhooks); 32 characters of base64.
    content_webhook_secret: SecretStr = SecretStr("ZGV2LWluc2VjdXJlLWNvbnRlbnQtaG9vaw==")
    # The resource whose published, non-deleted children the content API lists.
    catalog_parent_id: int = 1
    # Unset means the sandbox outside production; production must choose (and never the
    # sandbox, whose payment page pays any order without a payment).
    payment_provider: Literal["sandbox", "stripe"] | None = None
    # How long checkout holds the stock for an unpaid order (the provider's session expires
    # then; Stripe wants 30 minutes to 24 hours after it receives the request, hence 31), and
    # how much later the worker gives it back, so a payment made at the last moment still
    # finds its stock.
    checkout_expiry_minutes: int = Field(default=60, ge=31, le=1440)
    checkout_expiry_grace_seconds: float = Field(default=600.0, ge=0)
    # How long an Idempotency-Key of a checkout returns its first answer (Stripe: 24 h).
    checkout_idempotency_hours: float = Field(default=24.0, gt=0)
    payment_webhook_secret: SecretStr = SecretStr("dev-insecure-payment-webhook-secret")
    currency: str = "usd"
    # Where this service is reached from outside: the sandbox payment page links to it and
    # calls its own webhook through it.
    public_base_url: str = "http://127.0.0.1:8003"
    stripe_api_key: SecretStr | None = None
    # Who hears about contact inquiries.
    admin_emails: list[str] = ["admin@localhost"]

    # Resource API limits per client (`limits` notation) and where the counts live.
    rate_limit: str = "120/minute"
    rate_limit_storage_url: str = "memory://"

    # GraphQL operation limits (OWASP's GraphQL cheat sheet): nesting depth, aliases, tokens
    # of the document, and cost (objects it may return, lists counted by their page size).
    graphql_max_depth: int = 10
    graphql_max_aliases: int = 15
    graphql_max_tokens: int = 2000
    graphql_max_cost: int = 1000
    # Production's allow-list mode: only documents imported from a manifest
    # (`persisted-queries import`) run; automatic persisted queries store nothing.
    graphql_allow_list: bool = False
    # Documents stored by automatic persisted queries and not sent for this many days are
    # deleted by the worker (never those a manifest registered; nothing in allow-list mode).
    graphql_persisted_query_days: float = Field(default=30.0, gt=0)
    # GraphiQL at GET /graphql for browsers; always off in production, like introspection.
    graphql_ide: bool = True
    # Subscriptions over WebSocket (graphql-transport-ws at /graphql): open connections per
    # user and per process, subscriptions per connection, how long a socket may wait before
    # `connection_init`, and how often the server sends the protocol's `ping`.
    graphql_ws_max_connections_per_user: int = Field(default=10, ge=1)
    graphql_ws_max_connections: int = Field(default=5000, ge=1)
    graphql_ws_max_subscriptions_per_connection: int = Field(default=20, ge=1)
    graphql_ws_init_timeout_seconds: float = Field(default=10.0, gt=0)
    graphql_ws_ping_seconds: float = Field(default=15.0, gt=0)

    @model_validator(mode="after")
    def _choose_payment_provider(self) -> Self:
        if not self.is_production:
            if self.payment_provider is None:
                self.payment_provider = "sandbox"
            return self
        if self.payment_provider is None:
            raise ValueError(
                "refusing to start in production mode: COMMERCE_CONTENT_PAYMENT_PROVIDER is "
                "not set (choose stripe)"
            )
        if self.payment_provider == "sandbox":
            raise ValueError(
                "refusing to start in production mode: COMMERCE_CONTENT_PAYMENT_PROVIDER=sandbox "
                "takes no payment (choose stripe)"
            )
        return self


# Dependencies here and in each domain's `dependencies.py` are `async def` although they await
# nothing: FastAPI runs a plain `def` dependency in its thread pool, two thread hops per
# request for no work, which on a loaded machine showed in the payment webhook's tail latency
# (bench/subscriptions.py).
async def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


# What endpoints take to read the app's settings.
SettingsDep = Annotated[Settings, Depends(get_settings)]
