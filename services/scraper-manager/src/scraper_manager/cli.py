"""The `scraper-manager` console script."""

import argparse
import asyncio
import sys
from datetime import timedelta
from pathlib import Path

from servicekit.auth.api_keys import ISSUED_OVER_API, AccessLevel
from servicekit.cli import ExtraCommand, ServiceCLI
from servicekit.db.engine import create_engine, create_session_factory

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

    async def store() -> None:
        engine = create_engine(settings)
        try:
            async with create_session_factory(engine)() as session, session.begin():
                session.add(
                    OAuthClient(
                        client_id=client_id,
                        secret_hash=hash_secret(secret),
                        owner=args.owner,
                        level=args.level,
                    )
                )
        finally:
            await engine.dispose()

    asyncio.run(store())
    print(f"client_id: {client_id}")
    print(secret)
    return 0


def configure_dashboard_link(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--owner", required=True)
    parser.add_argument("--level", required=True, choices=[lv.value for lv in ISSUED_OVER_API])


def create_dashboard_link(settings: Settings, args: argparse.Namespace) -> int:
    async def issue() -> str:
        engine = create_engine(settings)
        try:
            async with create_session_factory(engine)() as session, session.begin():
                link = await dashboard_links(session).issue(
                    args.owner,
                    AccessLevel(args.level),
                    base_url=settings.public_url or f"http://127.0.0.1:{settings.port}",
                    ttl=timedelta(minutes=settings.dashboard_link_minutes),
                    api_key_id=None,  # the operator's: no key to end with
                )
        finally:
            await engine.dispose()
        print(f"expires_at: {link.expires_at.isoformat()}")
        return link.url

    print(asyncio.run(issue()))
    return 0


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
        ExtraCommand(
            "dashboard-link",
            "a one-time dashboard sign-in link; prints it last",
            configure_dashboard_link,
            create_dashboard_link,
        ),
    ],
)


def main() -> None:
    sys.exit(cli.main())


if __name__ == "__main__":
    main()
