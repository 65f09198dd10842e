"""The `webhook-hub` console script."""

import argparse
import asyncio
import sys
from pathlib import Path

from servicekit.auth.api_keys import AccessLevel
from servicekit.cli import ExtraCommand, ServiceCLI
from servicekit.db.engine import create_engine, create_session_factory

from webhook_hub.app import create_app
from webhook_hub.consumers.service import ConsumerService
from webhook_hub.settings import Settings
from webhook_hub.worker import run

MIGRATIONS = Path(__file__).resolve().parents[2] / "migrations"


def configure_consumers(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="consumers_command", required=True)
    approve = actions.add_parser(
        "approve-personal-data",
        help="let an owner subscribe to event types of personal data (inquiry.created)",
    )
    approve.add_argument("--owner", required=True)
    approve.add_argument("--revoke", action="store_true", help="withdraw the approval")


def run_consumers(settings: Settings, args: argparse.Namespace) -> int:
    approved = not args.revoke

    async def store() -> None:
        engine = create_engine(settings)
        try:
            async with create_session_factory(engine)() as session, session.begin():
                await ConsumerService(session).set_personal_data_approval(args.owner, approved)
        finally:
            await engine.dispose()

    asyncio.run(store())
    state = "approved" if approved else "not approved"
    print(f"owner {args.owner!r} is {state} for personal data", file=sys.stderr)
    return 0


cli = ServiceCLI(
    name="webhook-hub",
    settings=Settings,
    app=create_app,
    worker=run,
    migrations=MIGRATIONS,
    # `operator` keys submit events for any tenant and of any type; only this CLI issues them.
    key_levels=tuple(AccessLevel),
    extra=[
        ExtraCommand(
            name="consumers",
            help="operator settings of consumers (owners)",
            configure=configure_consumers,
            run=run_consumers,
        )
    ],
)


def main() -> None:
    sys.exit(cli.main())


if __name__ == "__main__":
    main()
