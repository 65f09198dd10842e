"""Settings of scraper-manager, read from `SCRAPER_MANAGER_*` (bare `DATABASE_URL`,
`NATS_URL`, `SMTP_URL` as fall-backs)."""

from typing import Annotated, ClassVar

from fastapi import Depends, Request
from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict
from servicekit.live import LiveStreamSettings
from servicekit.web.pages import PageSettings


class Settings(PageSettings, LiveStreamSettings):
    model_config = SettingsConfigDict(env_prefix="SCRAPER_MANAGER_")
    service_name: ClassVar[str] = "scraper-manager"

    port: int = 8002
    database_url: str = "postgresql://postgres@127.0.0.1:15432/scraper_manager"
    api_key_prefix: str = "smk"

    # The spec's stated capacity: scrapers per client.
    max_scrapers_per_client: int = 50
    # Proxy pools the operator offers: name -> proxy URLs (drawn in rotation).
    proxy_pools: dict[str, list[str]] = {}

    user_agent: str = "scraper-manager/0.1"
    # SSRF: crawls reach only globally routable addresses (servicekit.net), in every
    # environment; these networks are allowed besides (`make run` and tests: loopback).
    allowed_networks: list[str] = Field(default_factory=list)
    # Proxies of PROXY_POOLS are connected to under the same policy unless this is set (an
    # operator's proxy inside the network); the crawled URLs are checked either way.
    allow_internal_proxies: bool = False
    # A crawled response is read up to this many bytes; the rest is never read.
    max_response_bytes: int = 5 * 1024 * 1024
    max_redirects: int = 10
    # Longer links are not followed; at most this many links of a page are considered.
    max_link_length: int = 2048
    max_links_per_page: int = 5000
    # A run's log keeps at most this many lines (then one saying how many were dropped) ...
    run_log_max_lines: int = 10_000
    # ... for this many days; the worker prunes older lines every `run_log_prune_seconds`.
    run_log_retention_days: int = 30
    run_log_prune_seconds: float = 3600.0
    # Finished runs are deleted with their results and logs this long after they finished,
    # or sooner past a scraper's `keep_runs` (scraper_manager.runs.retention), every
    # `retention_prune_seconds`.
    result_retention_days: float = Field(default=30.0, gt=0)
    runs_per_worker: int = 4
    # Scrapers with `render: "browser"`: Debian's Chromium, driven by Playwright, one per
    # worker, at most this many pages open at once across the worker's runs (each page is a
    # renderer process: about 50-100 MiB) ...
    chromium_path: str = "/usr/bin/chromium"
    browser_pages_per_worker: int = Field(default=4, ge=1, le=64)
    # ... and these resource types never fetched (Playwright's names; [] fetches everything).
    browser_blocked_resources: list[str] = Field(default_factory=lambda: ["image", "media", "font"])
    # Requests per second to one host from all runs on all workers (README, "One politeness
    # budget per site"); None: each run's own `rate_limit` only (and shared crawl delays).
    host_budget_per_second: float | None = Field(default=None, gt=0)
    # A host's row of that budget is deleted by the worker's retention round once its last
    # request slot is this old: it then decides nothing for any interval shorter than this
    # (a budget, or a robots.txt crawl delay up to a day).
    host_budget_idle_seconds: float = Field(default=86_400.0, gt=0)
    run_poll_seconds: float = 1.0
    heartbeat_seconds: float = 1.0
    # A running run whose worker has not beaten for this long is failed ("worker lost").
    run_lease_seconds: float = 15.0
    scheduler_tick_seconds: float = 1.0
    # A pending run still waiting after this long is enqueued again (and lost runs reaped).
    requeue_after_seconds: float = 5.0
    # How long to wait for webhook-hub to answer a subscription request over NATS.
    hub_request_timeout_seconds: float = 5.0
    # A webhook registration still pending after this long was interrupted: the reconciler
    # deletes what the hub holds for it (well beyond the hub's answer time, so never one in
    # progress), every `webhook_reconcile_seconds`.
    webhook_pending_grace_seconds: float = 60.0
    webhook_reconcile_seconds: float = 30.0

    # The dashboard: where it is reached from outside (the base of one-time links; the
    # request's own address when unset), and how long such a link stays usable.
    public_url: str | None = None
    dashboard_link_minutes: int = 15
    # How many of each webhook's last deliveries the dashboard shows (the hub answers ≤ 50).
    dashboard_deliveries: int = Field(default=5, ge=1, le=50)

    # OAuth2: our own client-credentials tokens (HS256, short-lived) ...
    oauth_token_secret: SecretStr = SecretStr("dev-insecure-scraper-oauth-secret-0123456789")
    oauth_issuer: str = "scraper-manager"
    oauth_audience: str = "scraper-manager"
    oauth_token_ttl_seconds: int = 900
    # ... and, optionally, tokens from an external issuer, verified against its JWKS.
    external_issuer: str | None = None
    external_jwks_url: str | None = None
    external_audience: str | None = None


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


# What endpoints take to read the app's settings.
SettingsDep = Annotated[Settings, Depends(get_settings)]
