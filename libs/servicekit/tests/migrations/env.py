import servicekit.db.models  # noqa: F401  (registers the foundation tables)
from servicekit.db.migrations import run_migrations
from sqlmodel import SQLModel

run_migrations(SQLModel.metadata)
