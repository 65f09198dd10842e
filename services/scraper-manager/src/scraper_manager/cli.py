"""The `scraper-manager` console script."""

import argparse
import asyncio
import sys
from datetime import timedelta
from pathlib import Path

from servicekit.auth.api_keys import ISSUED_OVER_API, AccessLevel
from servicekit.cli import ExtraCommand, ServiceCLI
from servicekit.db.engine import create_engine, create_session_factory
from servicekit.web.pages.links import MAX_LINK_TTL_SECONDS, MIN_LINK_TTL_SECONDS, IssuedLink

from scraper_manager.app import create_app
from scraper_manager.dashboard.links import dashboard_links
from scraper_manager.models import OAuthClient
from scraper_manager.oauth.tokens import hash_secret, new_client_credentials
from scraper_manager.settings import Settings
from scraper_manager.worker import run

MIGRATIONS = Path(__file__).resolve().parents[2] / "migrations"
# As webhook-hub's `portal-link`.
DEFAULT_LINK_TTL_SECONDS = 3600


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
    # The options and defaults of webhook-hub's `portal-link`, so the two read alike.
    parser.add_argument("--owner", required=True, help="the client the dashboard shows")
    parser.add_argument(
        "--level",
        choices=[lv.value for lv in ISSUED_OVER_API],
        default=AccessLevel.READ.value,
        help="read sees everything, write changes it, admin also deletes (default: read)",
    )
    parser.add_argument(
        "--ttl-seconds",
        type=int,
        default=DEFAULT_LINK_TTL_SECONDS,
        help=f"{MIN_LINK_TTL_SECONDS} to {MAX_LINK_TTL_SECONDS}, default 3600",
    )


def create_dashboard_link(settings: Settings, args: argparse.Namespace) -> int:
    if not MIN_LINK_TTL_SECONDS <= args.ttl_seconds <= MAX_LINK_TTL_SECONDS:
        print(
            f"--ttl-seconds must be {MIN_LINK_TTL_SECONDS} to {MAX_LINK_TTL_SECONDS}",
            file=sys.stderr,
        )
        return 2

    async def issue() -> IssuedLink:
        engine = create_engine(settings)
        try:
            async with create_session_factory(engine)() as session, session.begin():
                return await dashboard_links(session).issue(
                    args.owner,
                    AccessLevel(args.level),
                    base_url=settings.public_url or f"http://127.0.0.1:{settings.port}",
                    ttl=timedelta(seconds=args.ttl_seconds),
                    api_key_id=None,  # the operator's: no key to end with
                )
        finally:
            await engine.dispose()

    issued = asyncio.run(issue())
    # What it is on stderr, the link alone on stdout: `LINK=$(scraper-manager dashboard-link
    # ...)` holds just the link.
    print(
        f"dashboard link for {args.owner!r} ({args.level}), usable once until "
        f"{issued.expires_at.isoformat()}:",
        file=sys.stderr,
    )
    print(issued.url)
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
