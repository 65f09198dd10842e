from commerce_content.models import metadata
from servicekit.db.migrations import run_migrations

run_migrations(metadata)
