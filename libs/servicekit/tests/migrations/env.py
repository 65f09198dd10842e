from sqlmodel import SQLModel

import servicekit.db.models  # noqa: F401  (registers the foundation tables)
from servicekit.db.migrations import run_migrations

run_migrations(SQLModel.metadata)
