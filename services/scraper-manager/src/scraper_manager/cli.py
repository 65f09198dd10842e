"""The `scraper-manager` console script."""

import sys
from pathlib import Path

from servicekit.cli import ServiceCLI

from scraper_manager.app import create_app
from scraper_manager.settings import Settings
from scraper_manager.worker import run

MIGRATIONS = Path(__file__).resolve().parents[2] / "migrations"

cli = ServiceCLI(
    name="scraper-manager", settings=Settings, app=create_app, worker=run, migrations=MIGRATIONS
)


def main() -> None:
    sys.exit(cli.main())


if __name__ == "__main__":
    main()
