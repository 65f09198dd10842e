from servicekit.db.migrations import run_migrations
from webhook_hub.models import metadata

run_migrations(metadata)
