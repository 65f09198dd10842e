"""Live streams (Server-Sent Events) for every service with pages: one source of change notices
per process fanned out in memory (`hub`), capped per session, per owner and per process
(`admission`), the notices sent after commit by whoever changes what the streams show
(`notices`). Framework-free: workers import the announcer; the FastAPI glue (the app resource,
the dependency) is `servicekit.web.live`.

A service mixes `LiveStreamSettings` into its settings, adds `live_streams(SUBJECT)` to its
app's resources, opens a stream with `LiveHubDep.open(...)` in its endpoint and answers it with
`event_stream(..., on_close=stream.close)`; its writers call `LiveAnnouncer(...).changed(keys)`.
"""

from __future__ import annotations

from pydantic import Field

from servicekit.live.admission import CapReached, StreamCaps, StreamCounts
from servicekit.live.hub import LiveHub, LiveStream, TooManyLiveStreams
from servicekit.live.notices import LiveAnnouncer, encode_keys, parse_keys
from servicekit.settings import ServiceSettings

__all__ = [
    "CapReached",
    "LiveAnnouncer",
    "LiveHub",
    "LiveStream",
    "LiveStreamSettings",
    "StreamCaps",
    "StreamCounts",
    "TooManyLiveStreams",
    "encode_keys",
    "parse_keys",
]


class LiveStreamSettings(ServiceSettings):
    """Caps on the live streams of one API process, and how they read."""

    live_streams_per_session: int = Field(default=5, ge=1)
    live_streams_per_owner: int = Field(default=20, ge=1)
    live_streams_per_process: int = Field(default=2000, ge=1)
    # Database reads the process's streams make at once (the pool is the API's first).
    live_stream_reads: int = Field(default=4, ge=1)
    # A key's streams look at most this often, however many changes it has.
    live_min_interval_seconds: float = Field(default=1.0, ge=0, le=60)
    # An open stream checks its session again (signed out? key revoked?) at most this often,
    # before it shows more.
    live_session_recheck_seconds: float = Field(default=10.0, ge=0, le=300)

    @property
    def live_stream_caps(self) -> StreamCaps:
        return StreamCaps(
            per_session=self.live_streams_per_session,
            per_owner=self.live_streams_per_owner,
            per_process=self.live_streams_per_process,
        )
