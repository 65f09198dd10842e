"""Service settings from the environment, with a per-service prefix and shared fall-backs."""

from __future__ import annotations

import os
from enum import StrEnum
from typing import Any, ClassVar

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

# Values that ship in code for development; production refuses to start with any of them.
INSECURE_SECRET_VALUES = frozenset({"", "change-me", "changeme", "secret", "dev", "development"})
DEV_SECRET_PREFIX = "dev-insecure-"  # noqa: S105 (a marker, not a secret)


class Environment(StrEnum):
    DEVELOPMENT = "development"
    TEST = "test"
    PRODUCTION = "production"


class InsecureSettingsError(ValueError):
    """Production mode was asked to run with a missing or development secret."""


class SharedEnvironmentSource(PydanticBaseSettingsSource):
    """Reads bare `DATABASE_URL`, `NATS_URL`, `SMTP_URL` when the prefixed variable is unset.

    One set of servers can then serve all three services (the embedded dev stack, CI), while
    an operator can still point one service elsewhere with its prefixed variable.
    """

    def __init__(self, settings_cls: type[BaseSettings], shared: frozenset[str]) -> None:
        super().__init__(settings_cls)
        self._shared = shared

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        value = os.environ.get(field_name.upper()) if field_name in self._shared else None
        return value, field_name, False

    def __call__(self) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for name in self._shared:
            value = os.environ.get(name.upper())
            if value:
                found[name] = value
        return found


class ServiceSettings(BaseSettings):
    """Base of every service's settings; subclasses set `env_prefix` and their own fields."""

    model_config = SettingsConfigDict(extra="ignore", case_sensitive=False)

    shared_env_fields: ClassVar[frozenset[str]] = frozenset(
        {"database_url", "nats_url", "smtp_url"}
    )
    service_name: ClassVar[str] = "service"

    env: Environment = Environment.DEVELOPMENT
    host: str = "127.0.0.1"
    port: int = 8000
    database_url: str = "postgresql://postgres@127.0.0.1:15432/postgres"
    db_pool_size: int = 10
    db_max_overflow: int = 10
    # One server, or several separated by commas (the nodes of a cluster): a client tries
    # them in turn at its start and reconnects to another when its server goes away.
    nats_url: str = "nats://127.0.0.1:14222"
    smtp_url: str = "smtp://127.0.0.1:10025"
    smtp_from: str = "platform@localhost"
    # Mail outbox: a failed message waits first_seconds, doubling up to max_seconds, and is
    # dead-lettered (kept, logged, counted) once it is max_age_hours old.
    mail_poll_seconds: float = 2.0
    mail_retry_first_seconds: float = 2.0
    mail_retry_max_seconds: float = 3600.0
    mail_max_age_hours: float = 168.0
    # Mail sent or dead-lettered this long ago is deleted (servicekit.retention).
    mail_retention_days: float = Field(default=30.0, gt=0)
    log_level: str = "INFO"
    log_json: bool = True
    events_stream: str = "EVENTS"
    events_max_age_days: float = 7.0
    events_duplicate_window_seconds: float = 120.0
    # Copies of each message in a clustered NATS (3 on a 3-node cluster).
    events_stream_replicas: int = 1
    # Where a worker answers /healthz, /readyz and /metrics (on `host`); unset: no listener.
    worker_probe_port: int | None = None
    # A worker loop that completed no iteration (even an empty one) for this long, beyond its
    # own poll interval, makes `/readyz` answer 503 naming it (servicekit.loops).
    worker_loop_stall_seconds: float = 300.0
    # False where operators own the stream (a Kubernetes Job runs `streams ensure`): the
    # service then only waits for it to exist.
    manage_events_stream: bool = True
    outbox_batch_size: int = 500
    outbox_poll_seconds: float = 1.0
    # Published outbox rows are deleted this long after publication; rows set aside are
    # kept until an operator deals with them (servicekit.retention).
    outbox_retention_hours: float = Field(default=24.0, gt=0)
    # How often each retention loop runs, and the rows it deletes per statement.
    retention_prune_seconds: float = Field(default=300.0, gt=0)
    retention_batch_size: int = Field(default=5000, ge=1, le=100_000)
    api_key_prefix: str = "key"
    # Each process remembers a key it found active for this long (servicekit.auth.key_cache):
    # a key revoked elsewhere keeps working here that long at most. 0: every request reads it.
    api_key_cache_seconds: float = Field(default=0.0, ge=0)
    # Larger request bodies get 413, larger request heads (request line and headers) 431.
    max_request_body_bytes: int = 1024 * 1024
    max_request_header_bytes: int = 32 * 1024

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (
            init_settings,
            env_settings,
            SharedEnvironmentSource(settings_cls, cls.shared_env_fields),
            dotenv_settings,
            file_secret_settings,
        )

    @property
    def is_production(self) -> bool:
        return self.env == Environment.PRODUCTION

    @property
    def nats_servers(self) -> list[str]:
        """`nats_url`'s servers, each as given (nats-py's `servers=`)."""
        return split_server_urls(self.nats_url)

    @field_validator("nats_url")
    @classmethod
    def _name_a_nats_server(cls, value: str) -> str:
        if not split_server_urls(value):
            raise ValueError("NATS_URL names no server (e.g. nats://127.0.0.1:4222)")
        return value

    @model_validator(mode="after")
    def _refuse_insecure_production(self) -> ServiceSettings:
        if not self.is_production:
            return self
        problems: list[str] = []
        for name, field in type(self).model_fields.items():
            if not _is_secret_field(field):
                continue
            value = getattr(self, name)
            raw = value.get_secret_value() if isinstance(value, SecretStr) else value
            if raw is None:
                problems.append(f"{name} is missing")
            elif (
                raw.strip().lower() in INSECURE_SECRET_VALUES
                or raw.startswith(DEV_SECRET_PREFIX)
                or raw == _default_secret(field)
            ):
                problems.append(f"{name} has a development default")
        if problems:
            raise InsecureSettingsError(
                "refusing to start in production mode: " + "; ".join(sorted(problems))
            )
        return self


def split_server_urls(value: str) -> list[str]:
    """The servers of a comma-separated list (`nats://a:4222,nats://b:4222`), blanks and
    spaces around each left out; empty when it names none."""
    return [part.strip() for part in value.split(",") if part.strip()]


def _default_secret(field: FieldInfo) -> str | None:
    default = field.default
    return default.get_secret_value() if isinstance(default, SecretStr) else None


def _is_secret_field(field: FieldInfo) -> bool:
    annotation = field.annotation
    if annotation is SecretStr:
        return True
    return SecretStr in getattr(annotation, "__args__", ())
