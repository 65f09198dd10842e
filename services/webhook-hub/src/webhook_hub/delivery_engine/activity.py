"""What the worker says about its deliveries: an INFO line per interval with the counts, and a
WARNING per failed attempt with its ids. Never a line per success: at 10,000 deliveries a
second the log would cost more than the deliveries.
"""

from __future__ import annotations

from collections.abc import Sequence

import structlog

from webhook_hub.delivery_engine.decisions import RetryRules, decided
from webhook_hub.delivery_engine.jobs import AttemptResult
from webhook_hub.models import DeliveryStatus

logger = structlog.get_logger(__name__)


class DeliveryActivity:
    """Counts of recorded attempts since the last report."""

    def __init__(self, rules: RetryRules, interval_seconds: float, now: float) -> None:
        self._rules = rules
        self._interval = interval_seconds
        self._since = now
        self.attempted = self.succeeded = self.retried = self.given_up = 0

    def record(self, batch: Sequence[AttemptResult]) -> None:
        """Count a recorded batch; each failed attempt is logged with what comes next."""
        self.attempted += len(batch)
        for result in batch:
            if result.succeeded:
                self.succeeded += 1
                continue
            job = result.job
            retried = decided(result, self._rules).status is DeliveryStatus.PENDING
            if retried:
                self.retried += 1
            else:
                self.given_up += 1
            logger.warning(
                "delivery attempt failed",
                **job.log_fields(),
                attempt=job.attempts + 1,
                outcome=result.outcome.value,
                status_code=result.status_code,
                error=result.error,
                retried=retried,
            )

    def report(self, now: float, *, force: bool = False) -> None:
        """The counts of the interval just over (when it is over and anything happened)."""
        if not force and now - self._since < self._interval:
            return
        if self.attempted:
            logger.info(
                "deliveries attempted",
                attempted=self.attempted,
                succeeded=self.succeeded,
                failed=self.attempted - self.succeeded,
                retried=self.retried,
                given_up=self.given_up,
                seconds=round(now - self._since, 1),
            )
        self._since = now
        self.attempted = self.succeeded = self.retried = self.given_up = 0
