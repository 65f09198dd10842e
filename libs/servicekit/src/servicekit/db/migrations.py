"""Alembic wiring: each service keeps its own `migrations/` and runs it with `<service> migrate`."""

from __future__ import annotations

from pathlib import Path

from alembic import command, context
from alembic.config import Config
from sqlalchemy import MetaData, engine_from_config, pool

from servicekit.db.engine import to_sqlalchemy_url


def alembic_config(script_location: Path, database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(script_location))
    # ConfigParser interpolation would choke on a '%' in a password.
    config.set_main_option("sqlalchemy.url", to_sqlalchemy_url(database_url).replace("%", "%%"))
    return config


def upgrade(script_location: Path, database_url: str, revision: str = "head") -> None:
    command.upgrade(alembic_config(script_location, database_url), revision)


def downgrade(script_location: Path, database_url: str, revision: str) -> None:
    command.downgrade(alembic_config(script_location, database_url), revision)


def run_migrations(target_metadata: MetaData) -> None:
    """Body of every service's `migrations/env.py`: online migrations in one transaction."""
    config = context.config
    if context.is_offline_mode():
        context.configure(
            url=config.get_main_option("sqlalchemy.url"),
            target_metadata=target_metadata,
            literal_binds=True,
        )
        with context.begin_transaction():
            context.run_migrations()
        return
    connectable = engine_from_config(
        config.get_section(config.config_ini_section, {}),
        prefix="sqlalchemy.",
        poolclass=pool.NullPool,
    )
    with connectable.connect() as connection:
        context.configure(connection=connection, target_metadata=target_metadata, compare_type=True)
        with context.begin_transaction():
            context.run_migrations()
