"""`scraper-manager worker`: the outbox relay and the service's background loops (runs,
schedules, retention of runs, results, run logs and sign-in links, expired page sessions, and
the reconciliation of interrupted webhook registrations)."""

import asyncio

from servicekit.auth.page_sessions import session_cleanup_loop
from servicekit.retention import link_retention_loop
from servicekit.worker import run_worker

from scraper_manager.events import registry
from scraper_manager.models import DashboardLink, DashboardSession
from scraper_manager.runner import log_prune_loop, run_loop
from scraper_manager.runs.retention import run_retention_loop
from scraper_manager.scheduling.scheduler import scheduler_loop
from scraper_manager.settings import Settings
from scraper_manager.webhooks.service import webhook_reconcile_loop


async def run(settings: Settings, stop: asyncio.Event | None = None) -> None:
    await run_worker(
        settings,
        source="scraper-manager",
        registry=registry,
        loops=[
            run_loop(settings),
            scheduler_loop(settings),
            webhook_reconcile_loop(settings),
            log_prune_loop(settings),
            session_cleanup_loop(DashboardSession, settings.session_cleanup_seconds),
            run_retention_loop(settings),
            link_retention_loop(DashboardLink, settings, settings.link_retention_hours),
        ],
        stop=stop,
    )
