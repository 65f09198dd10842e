"""Production refuses commerce-content's development secrets."""

from __future__ import annotations

import pytest
from commerce_content.settings import Settings
from pydantic import ValidationError

SECRETS = (
    "JWT_SECRET",
    "CONTENT_API_KEY",
    "PAYMENT_WEBHOOK_SECRET",
    "CONTENT_WEBHOOK_SECRET",
)


def test_production_refuses_to_start_with_development_secrets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COMMERCE_CONTENT_ENV", "production")
    with pytest.raises(ValidationError) as refused:
        Settings()
    for name in SECRETS:
        assert name.lower() in str(refused.value)


def test_production_starts_with_real_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMMERCE_CONTENT_ENV", "production")
    for n, name in enumerate(SECRETS):
        monkeypatch.setenv(f"COMMERCE_CONTENT_{name}", f"a-real-secret-{n}-Zx81kQ")
    monkeypatch.setenv("COMMERCE_CONTENT_STRIPE_API_KEY", "sk_live_example_value_123")
    monkeypatch.setenv("COMMERCE_CONTENT_PAYMENT_PROVIDER", "stripe")
    assert Settings().is_production


def _production_with_real_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMMERCE_CONTENT_ENV", "production")
    for n, name in enumerate(SECRETS):
        monkeypatch.setenv(f"COMMERCE_CONTENT_{name}", f"a-real-secret-{n}-Zx81kQ")
    monkeypatch.setenv("COMMERCE_CONTENT_STRIPE_API_KEY", "sk_live_example_value_123")


def test_production_refuses_to_start_without_a_chosen_payment_provider(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _production_with_real_secrets(monkeypatch)
    monkeypatch.delenv("COMMERCE_CONTENT_PAYMENT_PROVIDER", raising=False)
    with pytest.raises(ValidationError) as refused:
        Settings()
    assert "COMMERCE_CONTENT_PAYMENT_PROVIDER" in str(refused.value)


def test_production_refuses_to_start_with_the_sandbox_provider(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _production_with_real_secrets(monkeypatch)
    monkeypatch.setenv("COMMERCE_CONTENT_PAYMENT_PROVIDER", "sandbox")
    with pytest.raises(ValidationError) as refused:
        Settings()
    assert "COMMERCE_CONTENT_PAYMENT_PROVIDER" in str(refused.value)
    assert "sandbox" in str(refused.value)


def test_development_defaults_to_the_sandbox_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COMMERCE_CONTENT_ENV", raising=False)
    monkeypatch.delenv("COMMERCE_CONTENT_PAYMENT_PROVIDER", raising=False)
    assert Settings().payment_provider == "sandbox"
