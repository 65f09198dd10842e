"""The console script without a usable database: `portal-link`, `consumers` and the kit's
commands print one line naming the database (its password hidden) and what to do, exit 2,
no traceback (servicekit's ServiceCLI; its rules are tested there)."""

from __future__ import annotations

import pytest
from servicekit.testing.console import empty_database, own_environment, run_console_script


async def run_script(*args: str, database_url: str) -> tuple[int, str, str]:
    return await run_console_script(
        "webhook-hub", *args, env=own_environment("WEBHOOK_HUB_", DATABASE_URL=database_url)
    )


@pytest.mark.parametrize(
    "args",
    [
        ("portal-link", "--owner", "someone"),
        ("consumers", "approve-personal-data", "--owner", "someone"),
        ("api-keys", "create", "--owner", "someone", "--level", "operator"),
    ],
)
async def test_an_unreachable_database_is_one_line_naming_it_and_what_to_do_exit_2(
    args: tuple[str, ...],
) -> None:
    code, out, err = await run_script(
        *args, database_url="postgresql://me:hunter2@127.0.0.1:1/webhook_hub"
    )
    assert (code, out) == (2, "")
    [line] = err.strip().splitlines()
    assert line.startswith(
        "webhook-hub: cannot use the database at postgresql://me:***@127.0.0.1:1/webhook_hub"
    )
    assert "`make run` first, or set DATABASE_URL (WEBHOOK_HUB_DATABASE_URL)" in line
    assert "hunter2" not in err


async def test_portal_link_on_a_database_without_tables_says_to_migrate_it(
    postgres_server_url: str,
) -> None:
    with empty_database(postgres_server_url, "hub_empty") as url:
        code, out, err = await run_script("portal-link", "--owner", "someone", database_url=url)
    assert (code, out) == (2, "")
    [line] = err.strip().splitlines()
    assert "has no tables yet: run `webhook-hub migrate`" in line
