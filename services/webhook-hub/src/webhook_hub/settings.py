"""Settings of webhook-hub, read from `WEBHOOK_HUB_*` (bare `DATABASE_URL`, `NATS_URL`,
`SMTP_URL` as fall-backs)."""

from typing import ClassVar

from pydantic_settings import SettingsConfigDict
from servicekit.settings import ServiceSettings


class Settings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="WEBHOOK_HUB_")
    service_name: ClassVar[str] = "webhook-hub"

    port: int = 8001
    database_url: str = "postgresql://postgres@127.0.0.1:15432/webhook_hub"
    api_key_prefix: str = "whk"
    max_request_body_bytes: int = 256 * 1024
