"""The live run page's change notices (servicekit.live): the worker announces a run after each
commit that changes what the page shows (claimed, each heartbeat with its log lines and
counters, finished, reaped); the key is the run's id."""

from __future__ import annotations

LIVE_SUBJECT = "scraper-manager.live.runs"
