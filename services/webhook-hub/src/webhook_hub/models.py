"""Tables of webhook-hub. The foundation tables (API keys, outbox, processed events) come from
servicekit; the service's own tables are added here by later migrations."""

from servicekit.db.models import ApiKey, OutboxEvent, ProcessedEvent
from sqlmodel import SQLModel

metadata = SQLModel.metadata

__all__ = ["ApiKey", "OutboxEvent", "ProcessedEvent", "metadata"]
