"""The `scraper-manager` console script."""

import argparse
import asyncio
import sys
from pathlib import Path

from servicekit.auth.api_keys import ISSUED_OVER_API
from servicekit.cli import ExtraCommand, ServiceCLI, in_transaction
from servicekit.link_command import sign_in_link_command
from sqlmodel.ext.asyncio.session import AsyncSession

from scraper_manager.app import create_app
from scraper_manager.dashboard.links import dashboard_links
from scraper_manager.models import OAuthClient
from scraper_manager.oauth.tokens import hash_secret, new_client_credentials
from scraper_manager.settings import Settings
from scraper_manager.worker import run

MIGRATIONS = Path(__file__).resolve().parents[2] / "migrations"


def configure_oauth_clients(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="oauth_command", required=True)
    create = actions.add_parser(
        "create", help="register a client-credentials client; prints its secret last"
    )
    create.add_argument("--owner", required=True)
    # Same levels as API keys: `operator` acts across owners and is no client's to hold.
    create.add_argument("--level", required=True, choices=[lv.value for lv in ISSUED_OVER_API])


def create_oauth_client(settings: Settings, args: argparse.Namespace) -> int:
    client_id, secret = new_client_credentials()

    async def store(session: AsyncSession) -> None:
        session.add(
            OAuthClient(
                client_id=client_id,
                secret_hash=hash_secret(secret),
                owner=args.owner,
                level=args.level,
            )
        )

    asyncio.run(in_transaction(settings, store))
    print(f"client_id: {client_id}")
    print(secret)
    return 0


# The options, defaults and output of webhook-hub's `portal-link`, so the two read alike.
DASHBOARD_LINK = sign_in_link_command(
    "dashboard-link",
    "a one-time dashboard sign-in link; prints it last",
    pages="dashboard",
    owner_help="the client the dashboard shows",
    links=dashboard_links,
)
configure_dashboard_link = DASHBOARD_LINK.configure


cli = ServiceCLI(
    name="scraper-manager",
    settings=Settings,
    app=create_app,
    worker=run,
    migrations=MIGRATIONS,
    extra=[
        ExtraCommand(
            "oauth-clients",
            "OAuth2 client credentials",
            configure_oauth_clients,
            create_oauth_client,
        ),
        DASHBOARD_LINK,
    ],
)


def main() -> None:
    sys.exit(cli.main())


if __name__ == "__main__":
    main()
