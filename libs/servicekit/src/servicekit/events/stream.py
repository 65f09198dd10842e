"""The one JetStream stream all services publish to."""

from __future__ import annotations

from nats.js import JetStreamContext
from nats.js.api import DiscardPolicy, RetentionPolicy, StorageType, StreamConfig
from nats.js.errors import NotFoundError

from servicekit.events.envelope import SUBJECT_PREFIX
from servicekit.settings import ServiceSettings

DAY_SECONDS = 86400.0


def events_stream_config(settings: ServiceSettings) -> StreamConfig:
    return StreamConfig(
        name=settings.events_stream,
        subjects=[SUBJECT_PREFIX + ">"],
        storage=StorageType.FILE,
        retention=RetentionPolicy.LIMITS,
        discard=DiscardPolicy.OLD,
        max_age=settings.events_max_age_days * DAY_SECONDS,
        duplicate_window=settings.events_duplicate_window_seconds,
        num_replicas=settings.events_stream_replicas,
    )


async def ensure_events_stream(js: JetStreamContext, settings: ServiceSettings) -> None:
    """Create the stream, or bring an existing one to the configured limits."""
    config = events_stream_config(settings)
    try:
        await js.stream_info(settings.events_stream)
    except NotFoundError:
        await js.add_stream(config)
        return
    await js.update_stream(config)


async def require_events_stream(js: JetStreamContext, settings: ServiceSettings) -> None:
    """Raises `NotFoundError` until whoever owns the stream has created it."""
    await js.stream_info(settings.events_stream)
