from __future__ import annotations

import pytest
from pydantic import SecretStr, ValidationError
from pydantic_settings import SettingsConfigDict
from servicekit.settings import ServiceSettings


class ExampleSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="EXAMPLE_SVC_")
    token_secret: SecretStr = SecretStr("dev-insecure-token-secret")
    optional_secret: SecretStr | None = None


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("DATABASE_URL", "NATS_URL", "SMTP_URL"):
        monkeypatch.delenv(name, raising=False)


def test_prefixed_variables_configure_the_service(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXAMPLE_SVC_PORT", "9100")
    monkeypatch.setenv("EXAMPLE_SVC_NATS_URL", "nats://example:4222")
    settings = ExampleSettings()
    assert settings.port == 9100
    assert settings.nats_url == "nats://example:4222"


def test_bare_database_url_serves_when_the_prefixed_one_is_unset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://shared/db")
    monkeypatch.setenv("SMTP_URL", "smtp://mail:25")
    settings = ExampleSettings()
    assert settings.database_url == "postgresql://shared/db"
    assert settings.smtp_url == "smtp://mail:25"


def test_prefixed_variable_wins_over_the_bare_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://shared/db")
    monkeypatch.setenv("EXAMPLE_SVC_DATABASE_URL", "postgresql://own/db")
    assert ExampleSettings().database_url == "postgresql://own/db"


def test_bare_variables_other_than_the_shared_ones_are_ignored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PORT", "1234")
    assert ExampleSettings().port == 8000


def test_development_mode_accepts_development_secrets() -> None:
    assert ExampleSettings().token_secret.get_secret_value().startswith("dev-insecure-")


def test_production_refuses_a_development_default_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("EXAMPLE_SVC_ENV", "production")
    monkeypatch.setenv("EXAMPLE_SVC_OPTIONAL_SECRET", "a-real-secret-value-123456")
    with pytest.raises(ValidationError, match="token_secret has a development default"):
        ExampleSettings()


def test_production_refuses_a_missing_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXAMPLE_SVC_ENV", "production")
    monkeypatch.setenv("EXAMPLE_SVC_TOKEN_SECRET", "a-real-secret-value-123456")
    with pytest.raises(ValidationError, match="optional_secret is missing"):
        ExampleSettings()


def test_production_refuses_well_known_placeholders(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXAMPLE_SVC_ENV", "production")
    monkeypatch.setenv("EXAMPLE_SVC_TOKEN_SECRET", "change-me")
    monkeypatch.setenv("EXAMPLE_SVC_OPTIONAL_SECRET", "a-real-secret-value-123456")
    with pytest.raises(ValidationError):
        ExampleSettings()


def test_production_starts_with_real_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXAMPLE_SVC_ENV", "production")
    monkeypatch.setenv("EXAMPLE_SVC_TOKEN_SECRET", "a-real-secret-value-123456")
    monkeypatch.setenv("EXAMPLE_SVC_OPTIONAL_SECRET", "another-real-secret-7890")
    assert ExampleSettings().is_production


def test_secrets_are_not_shown_in_the_settings_repr() -> None:
    settings = ExampleSettings(token_secret=SecretStr("do-not-print-me"))
    assert "do-not-print-me" not in repr(settings)


class EncodedDefaultSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="ENCODED_SVC_")
    signing_secret: SecretStr = SecretStr("c29tZS1kZWZhdWx0LXZhbHVl")


def test_production_refuses_any_secret_left_at_its_declared_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ENCODED_SVC_ENV", "production")
    with pytest.raises(ValidationError, match="signing_secret has a development default"):
        EncodedDefaultSettings()


def test_nats_url_may_list_several_servers_separated_by_commas(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NATS_URL", "nats://a:4222, nats://b:4222,,nats://c:4222 ")
    settings = ExampleSettings()
    assert settings.nats_servers == ["nats://a:4222", "nats://b:4222", "nats://c:4222"]


def test_a_single_nats_server_is_a_list_of_one() -> None:
    assert ExampleSettings(nats_url="nats://a:4222").nats_servers == ["nats://a:4222"]


def test_a_nats_url_naming_no_server_is_refused() -> None:
    with pytest.raises(ValidationError, match="names no server"):
        ExampleSettings(nats_url=" , ")
