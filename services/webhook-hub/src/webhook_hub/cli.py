"""The `webhook-hub` console script."""

import argparse
import asyncio
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from servicekit.auth.api_keys import ISSUED_OVER_API, AccessLevel
from servicekit.cli import ExtraCommand, ServiceCLI
from servicekit.db.engine import create_engine, create_session_factory
from servicekit.web.pages.links import MAX_LINK_TTL_SECONDS, MIN_LINK_TTL_SECONDS, IssuedLink

from webhook_hub.app import create_app
from webhook_hub.consumers.service import ConsumerService
from webhook_hub.delivery_engine.maintenance import maintain
from webhook_hub.portal.schemas import DEFAULT_TTL_SECONDS
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


def configure_portal_link(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--owner", required=True, help="the consumer the portal shows")
    parser.add_argument(
        "--level",
        choices=[level.value for level in ISSUED_OVER_API],
        default=AccessLevel.READ.value,
        help="read sees everything, write changes it, admin also deletes (default: read)",
    )
    parser.add_argument(
        "--ttl-seconds", type=int, default=DEFAULT_TTL_SECONDS, help="60 to 86400, default 3600"
    )


def run_portal_link(settings: Settings, args: argparse.Namespace) -> int:
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
                return await portal_links(session).issue(
                    args.owner,
                    portal_level(AccessLevel(args.level)),
                    base_url=settings.public_url or f"http://127.0.0.1:{settings.port}",
                    ttl=timedelta(seconds=args.ttl_seconds),
                    api_key_id=None,  # the operator's: no key to end with
                )
        finally:
            await engine.dispose()

    issued = asyncio.run(issue())
    print(
        f"portal link for {args.owner!r} ({args.level}), usable once until "
        f"{issued.expires_at.isoformat()}:",
        file=sys.stderr,
    )
    print(issued.url)
    return 0


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
        ExtraCommand(
            name="portal-link",
            help="print a one-time link into the consumer portal for an owner",
            configure=configure_portal_link,
            run=run_portal_link,
        ),
    ],
)


def main() -> None:
    sys.exit(cli.main())


if __name__ == "__main__":
    main()
