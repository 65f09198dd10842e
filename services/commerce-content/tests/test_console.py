"""The console script without a usable database: `seed` and the kit's commands print one line
naming the database (its password hidden) and what to do, exit 2, no traceback (servicekit's
ServiceCLI; its rules are tested there)."""

from __future__ import annotations

import pytest
from servicekit.testing.console import empty_database, own_environment, run_console_script


async def run_script(*args: str, database_url: str) -> tuple[int, str, str]:
    return await run_console_script(
        "commerce-content",
        *args,
        env=own_environment("COMMERCE_CONTENT_", DATABASE_URL=database_url),
    )


@pytest.mark.parametrize(
    "args",
    [
        ("seed",),
        ("api-keys", "create", "--owner", "someone", "--level", "read"),
    ],
)
async def test_an_unreachable_database_is_one_line_naming_it_and_what_to_do_exit_2(
    args: tuple[str, ...],
) -> None:
    code, out, err = await run_script(
        *args, database_url="postgresql://me:hunter2@127.0.0.1:1/commerce_content"
    )
    assert (code, out) == (2, "")
    [line] = err.strip().splitlines()
    assert line.startswith(
        "commerce-content: cannot use the database at postgresql://me:***@127.0.0.1:1/commerce_content"
    )
    assert "`make run` first, or set DATABASE_URL (COMMERCE_CONTENT_DATABASE_URL)" in line
    assert "hunter2" not in err


async def test_seed_on_a_database_without_tables_says_to_migrate_it(
    postgres_server_url: str,
) -> None:
    with empty_database(postgres_server_url, "content_empty") as url:
        code, out, err = await run_script("seed", database_url=url)
    assert (code, out) == (2, "")
    [line] = err.strip().splitlines()
    assert "has no tables yet: run `commerce-content migrate`" in line
