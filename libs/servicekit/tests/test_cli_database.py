"""Every service's console script without a usable database: its database commands print one
line naming the database (password hidden) and what to do, and answer 2, instead of a
traceback; any other error keeps its traceback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic_settings import SettingsConfigDict
from servicekit.cli import ServiceCLI, database_problem
from servicekit.settings import ServiceSettings
from servicekit.testing.console import empty_database

MIGRATIONS = Path(__file__).parent / "migrations"


class KitSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="KIT_TEST_")


def cli_on(database_url: str) -> ServiceCLI:
    def unused(_: Any) -> Any:
        raise AssertionError("not a database command's")

    return ServiceCLI(
        name="kit-test",
        settings=lambda: KitSettings(database_url=database_url),
        app=unused,
        worker=unused,
        migrations=MIGRATIONS,
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["api-keys", "create", "--owner", "someone", "--level", "read"],
        ["migrate"],
    ],
)
def test_an_unreachable_database_is_one_line_naming_it_and_what_to_do_exit_2(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli_on("postgresql://me:hunter2@127.0.0.1:1/kit").main(argv)
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    [line] = err.strip().splitlines()
    assert line.startswith(
        "kit-test: cannot use the database at postgresql://me:***@127.0.0.1:1/kit"
    )
    assert line.endswith(
        "start the stack with `make run` first, or set DATABASE_URL (KIT_TEST_DATABASE_URL) "
        "to a reachable PostgreSQL"
    )
    assert "hunter2" not in err


def test_a_database_without_tables_says_to_migrate_it(
    postgres_server_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with empty_database(postgres_server_url, "kit_empty") as url:
        code = cli_on(url).main(["api-keys", "create", "--owner", "someone", "--level", "read"])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    [line] = err.strip().splitlines()
    assert "has no tables yet: run `kit-test migrate`" in line


def test_an_error_that_is_not_the_databases_keeps_its_traceback() -> None:
    assert database_problem(ValueError("a bug"), "postgresql://x/y", name="kit") is None
    assert database_problem(KeyError("k"), "not a url at all", name="kit") is None


def test_a_url_that_cannot_be_parsed_is_not_printed() -> None:
    line = database_problem(ConnectionRefusedError("refused"), "a:secret at no host", name="kit")
    assert line is not None
    assert "the database at the configured DATABASE_URL (refused)" in line
    assert "secret" not in line
