"""The `webhook-hub` console script."""

import argparse
import asyncio
import sys
from datetime import UTC, datetime
from pathlib import Path

from servicekit.auth.api_keys import AccessLevel
from servicekit.cli import ExtraCommand, ServiceCLI, in_transaction
from servicekit.db.engine import create_engine
from servicekit.link_command import sign_in_link_command
from sqlmodel.ext.asyncio.session import AsyncSession

from webhook_hub.app import create_app
from webhook_hub.consumers.service import ConsumerService
from webhook_hub.delivery_engine.maintenance import maintain
from webhook_hub.portal.service import portal_level, portal_links
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

    async def store(session: AsyncSession) -> None:
        await ConsumerService(session).set_personal_data_approval(args.owner, approved)

    asyncio.run(in_transaction(settings, store))
    state = "approved" if approved else "not approved"
    print(f"owner {args.owner!r} is {state} for personal data", file=sys.stderr)
    return 0


PORTAL_LINK = sign_in_link_command(
    "portal-link",
    "print a one-time link into the consumer portal for an owner",
    pages="portal",
    owner_help="the consumer the portal shows",
    links=portal_links,
    level_of=portal_level,
)
configure_portal_link = PORTAL_LINK.configure


def prepare_delivery_log(settings: Settings) -> None:
    """After `migrate`: the delivery log's partitions for now and ahead, so that the API can
    write a delivery (a test event) before any worker has made them (a worker running
    already does it instead: the round is skipped while its lock is held)."""

    async def once() -> None:
        engine = create_engine(settings)
        try:
            await maintain(engine, settings.delivery_log_layout, datetime.now(UTC))
        finally:
            await engine.dispose()

    asyncio.run(once())


cli = ServiceCLI(
    name="webhook-hub",
    settings=Settings,
    app=create_app,
    worker=run,
    migrations=MIGRATIONS,
    # `operator` keys submit events for any tenant and of any type; only this CLI issues them.
    key_levels=tuple(AccessLevel),
    after_migrate=prepare_delivery_log,
    extra=[
        ExtraCommand(
            name="consumers",
            help="operator settings of consumers (owners)",
            configure=configure_consumers,
            run=run_consumers,
        ),
        PORTAL_LINK,
    ],
)


def main() -> None:
    sys.exit(cli.main())


if __name__ == "__main__":
    main()
