"""The console script's one-time sign-in link command (webhook-hub's `portal-link`,
scraper-manager's `dashboard-link`): the same options, defaults, refusals and output in every
service, each passing its links, its pages' name and how a key's level maps to a page's.
Kept apart from `servicekit.cli` because the links load the web framework."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from sqlmodel.ext.asyncio.session import AsyncSession

from servicekit.auth.api_keys import ISSUED_OVER_API, AccessLevel
from servicekit.cli import ExtraCommand, in_transaction
from servicekit.web.pages.links import (
    MAX_LINK_TTL_SECONDS,
    MIN_LINK_TTL_SECONDS,
    IssuedLink,
    SignInLinks,
)

DEFAULT_LINK_TTL_SECONDS = 3600


def sign_in_link_command(
    name: str,
    help: str,
    *,
    pages: str,
    owner_help: str,
    links: Callable[[AsyncSession], SignInLinks[Any]],
    level_of: Callable[[AccessLevel], AccessLevel] = lambda level: level,
) -> ExtraCommand:
    """`name --owner O [--level L] [--ttl-seconds S]`: prints what the link is on stderr and
    the link alone on stdout (`LINK=$(... )` holds just the link); `pages` names them in that
    line ("portal"); `level_of` maps the level asked for to the link's."""

    def configure(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--owner", required=True, help=owner_help)
        parser.add_argument(
            "--level",
            choices=[level.value for level in ISSUED_OVER_API],
            default=AccessLevel.READ.value,
            help="read sees everything, write changes it, admin also deletes (default: read)",
        )
        parser.add_argument(
            "--ttl-seconds",
            type=int,
            default=DEFAULT_LINK_TTL_SECONDS,
            help=f"{MIN_LINK_TTL_SECONDS} to {MAX_LINK_TTL_SECONDS}, "
            f"default {DEFAULT_LINK_TTL_SECONDS}",
        )

    def run(settings: Any, args: argparse.Namespace) -> int:
        # A service's Settings: ServiceSettings with its `public_url`.
        if not MIN_LINK_TTL_SECONDS <= args.ttl_seconds <= MAX_LINK_TTL_SECONDS:
            print(
                f"--ttl-seconds must be {MIN_LINK_TTL_SECONDS} to {MAX_LINK_TTL_SECONDS}",
                file=sys.stderr,
            )
            return 2

        async def issue(session: AsyncSession) -> IssuedLink:
            return await links(session).issue(
                args.owner,
                level_of(AccessLevel(args.level)),
                base_url=settings.public_url or f"http://127.0.0.1:{settings.port}",
                ttl=timedelta(seconds=args.ttl_seconds),
                api_key_id=None,  # the operator's: no key to end with
            )

        issued = asyncio.run(in_transaction(settings, issue))
        print(
            f"{pages} link for {args.owner!r} ({args.level}), usable once until "
            f"{issued.expires_at.isoformat()}:",
            file=sys.stderr,
        )
        print(issued.url)
        return 0

    return ExtraCommand(name, help, configure, run)
