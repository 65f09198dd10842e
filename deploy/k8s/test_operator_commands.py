"""The README operator-command checker of `make check-deploy`: what it accepts and reports.

Each case is the repository's own README with one thing changed, against the overlays as
rendered by kustomize and the compose file.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from operator_commands import (
    COMPOSE,
    README,
    Manifest,
    Problem,
    api_key_commands,
    check,
    check_api_key_command,
    check_overlay_secrets,
    render_overlays,
    secret_commands,
)


@pytest.fixture(scope="module")
def overlays() -> dict[str, list[Manifest]]:
    return render_overlays()


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return loaded


@pytest.fixture(scope="module")
def readme() -> str:
    return README.read_text()


def command_creating(readme: str, secret: str) -> str:
    return next(c for c in secret_commands(readme) if f" {secret} " in c)


def messages(
    overlays: dict[str, list[Manifest]], overlay: str, command: str, secret: str
) -> list[str]:
    """What the checker says about `secret` when the README creates it with `command`."""
    problems, _ = check_overlay_secrets(overlay, overlays[overlay], [command])
    return [problem.message for problem in problems if secret in str(problem)]


def test_the_readme_commands_match_the_overlays_and_the_compose_file(
    readme: str, overlays: dict[str, list[Manifest]], compose: dict[str, Any]
) -> None:
    assert check(readme, overlays, compose) == []


def test_each_readme_secret_command_creates_its_secret_with_the_keys_written(
    readme: str, overlays: dict[str, list[Manifest]]
) -> None:
    commands = secret_commands(readme)
    _, created = check_overlay_secrets("prod", overlays["prod"], commands)

    assert sorted(created) == [
        "commerce-content-secrets",
        "postgres-credentials",
        "scraper-manager-secrets",
        "webhook-hub-secrets",
    ]
    assert set(created["webhook-hub-secrets"]["data"]) == {
        "WEBHOOK_HUB_DATABASE_URL",
        "WEBHOOK_HUB_SMTP_URL",
        "WEBHOOK_HUB_SESSION_SECRET",
    }
    assert created["webhook-hub-secrets"]["metadata"]["namespace"] == "event-platform"


def test_a_secret_the_pods_read_and_no_command_creates_is_reported(
    overlays: dict[str, list[Manifest]],
) -> None:
    problems, _ = check_overlay_secrets("dev", overlays["dev"], [])

    assert (
        Problem(
            "overlay dev: Secret postgres-credentials",
            "pods read it and no README command creates it",
        )
        in problems
    )


def test_a_key_no_setting_of_the_service_reads_is_reported(
    readme: str, overlays: dict[str, list[Manifest]]
) -> None:
    command = command_creating(readme, "webhook-hub-secrets").replace(
        "WEBHOOK_HUB_SMTP_URL=", "WEBHOOK_HUB_SMTP_URI="
    )

    found = messages(overlays, "prod", command, "webhook-hub-secrets")

    assert "WEBHOOK_HUB_SMTP_URI: no setting of webhook-hub reads it" in found
    assert (
        "lacks WEBHOOK_HUB_SMTP_URL (a secret or server setting of webhook-hub set nowhere else)"
        in found
    )


def test_a_secret_setting_left_out_of_its_secret_is_reported(
    readme: str, overlays: dict[str, list[Manifest]]
) -> None:
    original = command_creating(readme, "commerce-content-secrets")
    command = original.replace("--from-literal=COMMERCE_CONTENT_JWT_SECRET=", "--from-literal=X=")

    found = messages(overlays, "prod", command, "commerce-content-secrets")

    assert (
        "lacks COMMERCE_CONTENT_JWT_SECRET "
        "(a secret or server setting of commerce-content set nowhere else)"
    ) in found


def test_a_key_the_configmap_sets_too_is_reported(
    readme: str, overlays: dict[str, list[Manifest]]
) -> None:
    command = (
        command_creating(readme, "scraper-manager-secrets")
        + " --from-literal=SCRAPER_MANAGER_NATS_URL=nats://elsewhere:4222"
    )

    found = messages(overlays, "prod", command, "scraper-manager-secrets")

    assert found == ["SCRAPER_MANAGER_NATS_URL: also set by the container's ConfigMap or env"]


def test_an_empty_value_is_reported(readme: str, overlays: dict[str, list[Manifest]]) -> None:
    command = command_creating(readme, "scraper-manager-secrets").replace(
        "SCRAPER_MANAGER_PROXY_POOLS='{}'", "SCRAPER_MANAGER_PROXY_POOLS=''"
    )

    found = messages(overlays, "prod", command, "scraper-manager-secrets")

    assert found == ["SCRAPER_MANAGER_PROXY_POOLS is empty"]


def test_a_command_kubectl_refuses_is_reported(
    readme: str, overlays: dict[str, list[Manifest]]
) -> None:
    command = command_creating(readme, "webhook-hub-secrets").replace(
        "--from-literal=WEBHOOK_HUB_SMTP_URL", "--from-literl=WEBHOOK_HUB_SMTP_URL"
    )

    problems, created = check_overlay_secrets("prod", overlays["prod"], [command])

    assert "webhook-hub-secrets" not in created
    assert any(
        p.where == "README, with NS=event-platform" and "unknown flag: --from-literl" in p.message
        for p in problems
    )


def test_a_key_a_secret_key_ref_names_must_be_in_the_secret(
    readme: str, overlays: dict[str, list[Manifest]]
) -> None:
    command = command_creating(readme, "postgres-credentials").replace(
        "POSTGRES_PASSWORD=", "POSTGRES_PASS="
    )

    found = messages(overlays, "dev", command, "postgres-credentials")

    assert "lacks POSTGRES_PASSWORD (named by a secretKeyRef)" in found
    assert "POSTGRES_PASS: no pod reads it" in found


def test_a_secret_no_pod_of_any_overlay_reads_is_reported(
    readme: str, overlays: dict[str, list[Manifest]], compose: dict[str, Any]
) -> None:
    extra = "kubectl -n $NS create secret generic spare-secrets --from-literal=KEY=value\n```"
    changed = readme.replace("```\n\nChange a value", extra + "\n\nChange a value", 1)

    problems = check(changed, overlays, compose)

    assert problems == [Problem("README secret spare-secrets", "no pod of any overlay reads it")]


def test_a_table_of_keys_that_differs_from_the_command_is_reported(
    readme: str, overlays: dict[str, list[Manifest]], compose: dict[str, Any]
) -> None:
    changed = readme.replace(
        "| webhook-hub | `WEBHOOK_HUB_DATABASE_URL`, `WEBHOOK_HUB_SMTP_URL`, ",
        "| webhook-hub | `WEBHOOK_HUB_DATABASE_URL`, ",
    )

    problems = check(changed, overlays, compose)

    assert problems == [
        Problem("README table of keys, webhook-hub-secrets", "differs on WEBHOOK_HUB_SMTP_URL")
    ]


def test_the_readme_api_keys_commands_are_all_checked(readme: str) -> None:
    forms = [command.split(" api-keys ")[0] for command in api_key_commands(readme)]

    assert "docker compose exec commerce-content-api commerce-content" in forms
    assert "kubectl -n event-platform exec deploy/scraper-manager-api -- scraper-manager" in forms
    assert ".venv/bin/webhook-hub" in forms


def test_an_api_keys_command_with_a_level_the_service_does_not_issue_is_reported(
    overlays: dict[str, list[Manifest]], compose: dict[str, Any]
) -> None:
    command = (
        "docker compose exec webhook-hub-api webhook-hub api-keys create --owner ops --level root"
    )

    found = list(check_api_key_command(command, overlays, compose))

    assert len(found) == 1
    assert found[0].startswith("webhook-hub refuses its arguments: ")
    assert "invalid choice: 'root'" in found[0]


def test_an_api_keys_command_without_a_required_option_is_reported(
    overlays: dict[str, list[Manifest]], compose: dict[str, Any]
) -> None:
    command = ".venv/bin/scraper-manager api-keys create --level admin"

    found = list(check_api_key_command(command, overlays, compose))

    assert found == [
        "scraper-manager refuses its arguments: "
        "scraper-manager api-keys create: error: the following arguments are required: --owner"
    ]


def test_an_api_keys_command_in_a_deployment_that_does_not_exist_is_reported(
    overlays: dict[str, list[Manifest]], compose: dict[str, Any]
) -> None:
    command = (
        "kubectl -n event-platform exec deploy/webhook-hub -- "
        "webhook-hub api-keys create --owner ops --level admin"
    )

    found = list(check_api_key_command(command, overlays, compose))

    assert found == ["no overlay has a Deployment 'webhook-hub' in namespace 'event-platform'"]


def test_an_api_keys_command_in_another_namespace_is_reported(
    overlays: dict[str, list[Manifest]], compose: dict[str, Any]
) -> None:
    command = (
        "kubectl -n platform exec deploy/webhook-hub-api -- "
        "webhook-hub api-keys create --owner ops --level admin"
    )

    found = list(check_api_key_command(command, overlays, compose))

    assert found == ["no overlay has a Deployment 'webhook-hub-api' in namespace 'platform'"]


def test_an_api_keys_command_in_a_container_of_another_service_is_reported(
    overlays: dict[str, list[Manifest]], compose: dict[str, Any]
) -> None:
    in_compose = "docker compose exec scraper-manager-api webhook-hub api-keys create --owner o --level admin"
    in_kubernetes = (
        "kubectl -n event-platform-dev exec deploy/scraper-manager-worker -- "
        "webhook-hub api-keys create --owner o --level admin"
    )

    assert list(check_api_key_command(in_compose, overlays, compose)) == [
        "compose service 'scraper-manager-api' runs image "
        "event-platform/scraper-manager:latest, not webhook-hub's"
    ]
    assert list(check_api_key_command(in_kubernetes, overlays, compose)) == [
        "Deployment 'scraper-manager-worker' runs image "
        "ghcr.io/example/event-platform/scraper-manager:0.1.0-chromium, not webhook-hub's"
    ]


def test_an_api_keys_command_of_a_compose_service_that_does_not_exist_is_reported(
    overlays: dict[str, list[Manifest]], compose: dict[str, Any]
) -> None:
    command = "docker compose exec hub-api webhook-hub api-keys create --owner o --level admin"

    found = list(check_api_key_command(command, overlays, compose))

    assert found == ["docker-compose.yml has no service 'hub-api'"]


def test_an_api_keys_command_of_a_script_that_is_not_a_service_is_reported(
    overlays: dict[str, list[Manifest]], compose: dict[str, Any]
) -> None:
    command = ".venv/bin/webhookhub api-keys create --owner o --level admin"

    found = list(check_api_key_command(command, overlays, compose))

    assert found == ["'webhookhub' is not a service's console script"]
