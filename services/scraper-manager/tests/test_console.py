"""The console script without a usable database: one line naming the database (its password
hidden) and what to do, exit code 2, no traceback (servicekit's ServiceCLI; its rules are
tested there), for the kit's commands and this service's own; `dashboard-link` takes
webhook-hub's `portal-link` options and defaults."""

from __future__ import annotations

import argparse
from typing import Any

import pytest
from scraper_manager.cli import configure_dashboard_link
from servicekit.testing.console import empty_database, own_environment, run_console_script
from webhook_hub.cli import configure_portal_link


async def run_script(*args: str, database_url: str) -> tuple[int, str, str]:
    return await run_console_script(
        "scraper-manager", *args, env=own_environment("SCRAPER_MANAGER_", DATABASE_URL=database_url)
    )


@pytest.mark.parametrize(
    "args",
    [
        ("dashboard-link", "--owner", "someone"),
        ("api-keys", "create", "--owner", "someone", "--level", "read"),
        ("oauth-clients", "create", "--owner", "someone", "--level", "read"),
        ("migrate",),
    ],
)
async def test_an_unreachable_database_is_one_line_naming_it_and_what_to_do_exit_2(
    args: tuple[str, ...],
) -> None:
    code, out, err = await run_script(
        *args, database_url="postgresql://me:hunter2@127.0.0.1:1/scraper_manager"
    )
    assert code == 2
    assert out == ""
    [line] = err.strip().splitlines()
    assert line.startswith(
        "scraper-manager: cannot use the database at postgresql://me:***@127.0.0.1:1/scraper_manager"
    )
    assert "`make run` first, or set DATABASE_URL" in line
    assert "hunter2" not in err


async def test_a_database_without_tables_says_to_migrate_it(postgres_server_url: str) -> None:
    with empty_database(postgres_server_url, "empty") as url:
        code, out, err = await run_script("dashboard-link", "--owner", "someone", database_url=url)
    assert (code, out) == (2, "")
    [line] = err.strip().splitlines()
    assert "has no tables yet: run `scraper-manager migrate`" in line


async def test_dashboard_link_refuses_a_ttl_outside_a_minute_to_a_day_as_portal_link_does() -> None:
    code, out, err = await run_script(
        "dashboard-link",
        "--owner",
        "someone",
        "--ttl-seconds",
        "30",
        database_url="postgresql://x/y",
    )
    assert (code, out) == (2, "")
    assert err.strip() == "--ttl-seconds must be 60 to 86400"


def options_of(configure: Any) -> dict[str, tuple[object, ...]]:
    """Each option of a command as an operator meets it: its flags, whether it is required,
    its default, its choices and the type its value is read as."""
    parser = argparse.ArgumentParser()
    configure(parser)
    return {
        action.dest: (
            tuple(action.option_strings),
            action.required,
            action.default,
            tuple(action.choices) if action.choices is not None else None,
            action.type,
        )
        for action in parser._actions
        if action.dest != "help"
    }


def test_dashboard_link_takes_portal_links_options_with_the_same_defaults_and_levels() -> None:
    """An operator who knows one command knows the other: same flags, same required ones,
    same defaults (level read, 3600 s), the same levels offered (read, write, admin; never
    operator) and values read alike."""
    dashboard = options_of(configure_dashboard_link)
    assert dashboard == options_of(configure_portal_link)
    assert dashboard["level"][2:4] == ("read", ("read", "write", "admin"))
    assert dashboard["ttl_seconds"][2] == 3600
