"""The `webhook-hub` console script."""

import sys
from pathlib import Path

from servicekit.auth.api_keys import AccessLevel
from servicekit.cli import ServiceCLI

from webhook_hub.app import create_app
from webhook_hub.settings import Settings
from webhook_hub.worker import run

MIGRATIONS = Path(__file__).resolve().parents[2] / "migrations"

cli = ServiceCLI(
    name="webhook-hub",
    settings=Settings,
    app=create_app,
    worker=run,
    migrations=MIGRATIONS,
    # `operator` keys submit events for any tenant and of any type; only this CLI issues them.
    key_levels=tuple(AccessLevel),
)


def main() -> None:
    sys.exit(cli.main())


if __name__ == "__main__":
    main()
