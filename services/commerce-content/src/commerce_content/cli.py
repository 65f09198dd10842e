"""The `commerce-content` console script, with `tokens create` for bearer JWTs."""

import argparse
import asyncio
import json
import sys
from pathlib import Path

from servicekit.auth.jwt import InvalidToken, JWTCodec
from servicekit.cli import ExtraCommand, ServiceCLI
from servicekit.db.engine import create_engine

from commerce_content.app import create_app
from commerce_content.graphql_api.persisted import (
    InvalidManifest,
    import_manifest,
    manifest_operations,
)
from commerce_content.graphql_api.schema import build_schema
from commerce_content.identity.dependencies import user_id_of
from commerce_content.seed import seed_demo
from commerce_content.settings import Settings
from commerce_content.worker import run

MIGRATIONS = Path(__file__).resolve().parents[2] / "migrations"
ROLES = ("admin", "manager", "user", "guest")


def user_id_argument(text: str) -> str:
    """The service refuses tokens whose `sub` is not a user id: none are issued."""
    try:
        return str(user_id_of(text))
    except InvalidToken as exc:
        raise argparse.ArgumentTypeError("--sub is a user id (1 to 2147483647)") from exc


def configure_tokens(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="tokens_command", required=True)
    create = actions.add_parser("create", help="issue an HS256 JWT; prints it as the last line")
    create.add_argument("--sub", required=True, type=user_id_argument, help="the user id")
    create.add_argument("--role", required=True, choices=ROLES)
    create.add_argument("--ttl", type=int, help="lifetime in seconds (default: settings)")


def create_token(settings: Settings, args: argparse.Namespace) -> int:
    codec = JWTCodec(
        settings.jwt_secret.get_secret_value(),
        issuer=settings.jwt_issuer,
        audience=settings.jwt_audience,
        ttl_seconds=settings.jwt_ttl_seconds,
    )
    print(codec.issue(args.sub, {"role": args.role}, ttl_seconds=args.ttl))
    return 0


def configure_seed(parser: argparse.ArgumentParser) -> None:
    parser.description = "Load the demo data (users of each role, catalog, pages, posts, articles)"


def run_seed(settings: Settings, args: argparse.Namespace) -> int:
    loaded = asyncio.run(seed_demo(settings))
    print("demo data loaded" if loaded else "demo data already present")
    return 0


SCHEMA_FILE = Path(__file__).resolve().parents[2] / "schema.graphql"


def configure_graphql_schema(parser: argparse.ArgumentParser) -> None:
    parser.description = "Print the GraphQL schema (SDL), or write it to schema.graphql"
    parser.add_argument("--write", action="store_true", help=f"write {SCHEMA_FILE.name}")


def print_graphql_schema(settings: Settings, args: argparse.Namespace) -> int:
    sdl = build_schema(settings).as_str() + "\n"
    if args.write:
        SCHEMA_FILE.write_text(sdl, encoding="utf-8")
        print(f"wrote {SCHEMA_FILE}")
    else:
        print(sdl, end="")
    return 0


def configure_persisted_queries(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="persisted_command", required=True)
    imported = actions.add_parser(
        "import",
        help="register a manifest's operations (the only ones run in allow-list mode)",
    )
    imported.add_argument(
        "file",
        type=Path,
        help="Apollo's persisted query manifest, or a JSON object {sha256: document}",
    )


def run_persisted_queries(settings: Settings, args: argparse.Namespace) -> int:
    try:
        operations = manifest_operations(json.loads(args.file.read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:  # InvalidManifest and JSON errors are ValueErrors
        kind = "invalid manifest" if isinstance(exc, InvalidManifest) else "cannot read"
        print(f"{kind}: {exc}", file=sys.stderr)
        return 2

    async def register() -> None:
        engine = create_engine(settings)
        try:
            await import_manifest(engine, operations)
        finally:
            await engine.dispose()

    asyncio.run(register())
    print(f"registered {len(operations)} operations")
    return 0


cli = ServiceCLI(
    name="commerce-content",
    settings=Settings,
    app=create_app,
    worker=run,
    migrations=MIGRATIONS,
    extra=[
        ExtraCommand("tokens", "issue bearer JWTs", configure_tokens, create_token),
        ExtraCommand("seed", "load the demo data", configure_seed, run_seed),
        ExtraCommand(
            "graphql-schema",
            "print the GraphQL SDL",
            configure_graphql_schema,
            print_graphql_schema,
        ),
        ExtraCommand(
            "persisted-queries",
            "register persisted GraphQL operations from a manifest",
            configure_persisted_queries,
            run_persisted_queries,
        ),
    ],
)


def main() -> None:
    sys.exit(cli.main())


if __name__ == "__main__":
    main()
