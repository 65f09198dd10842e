"""How the portal words what the log stores: a delivery's state (a pending delivery that
already failed is retrying, not new), an attempt's error as a sentence, a probe's answer.
Pure and total: any stored text or value in, a sentence out (the raw text stays on the
delivery's page)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from webhook_hub.models import DeliveryStatus
from webhook_hub.subscriptions.schemas import Probe

# Stored error texts (sender: `f"{type(exc).__name__}: {exc}"`, "timed out after N s",
# "refused: ...", http1's HttpFailure texts) -> a sentence; the first pattern found wins.
_ERRORS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), sentence)
    for pattern, sentence in (
        (r"^refused:", "Not sent: the hub's address policy refuses this endpoint's address."),
        (r"^timed out after ([0-9.]+) s", "No answer within {0} s, the endpoint's timeout."),
        (r"timeout|timed out", "No answer within the endpoint's timeout."),
        (
            r"ConnectionRefused|Errno 111\b|Connection refused|Errno 61\b|Connect call failed",
            "Connection refused by the receiver: nothing accepts connections at that address "
            "and port (is the receiver running?).",
        ),
        (
            r"gaierror|Name or service not known|Temporary failure in name resolution"
            r"|nodename nor servname|Errno -[235]\b|No address associated",
            "The receiver's host name could not be resolved (DNS).",
        ),
        (
            r"SSL|TLS|certificate",
            "The secure connection (TLS) failed: check the receiver's certificate.",
        ),
        (
            r"ConnectionReset|reset by peer|Errno 104\b|Errno 54\b",
            "The receiver reset the connection before answering.",
        ),
        (
            r"closed before an answer|ServerDisconnected|IncompleteRead|BrokenPipe|Errno 32\b",
            "The receiver closed the connection before answering.",
        ),
        (
            r"No route to host|Network is unreachable|Errno 11[03]\b|Errno 101\b",
            "The receiver's network cannot be reached from the hub.",
        ),
        (
            r"invalid HTTP answer|answer's head is over",
            "The receiver's answer was not valid HTTP.",
        ),
    )
)
UNKNOWN_ERROR = "The request failed before any answer came (the details are below)."


def describe_error(error: str | None, status_code: int | None = None) -> str | None:
    """An attempt's outcome in words; None when there is nothing to say (no attempt yet)."""
    if status_code is not None:
        return describe_status(status_code)
    if not error or not error.strip():
        return None
    for pattern, sentence in _ERRORS:
        found = pattern.search(error)
        if found:
            return sentence.format(*found.groups())
    return UNKNOWN_ERROR


def describe_status(status_code: int) -> str:
    if 200 <= status_code < 300:
        return f"Accepted (HTTP {status_code})."
    if status_code == 410:
        return "HTTP 410 Gone: the receiver says this endpoint no longer exists."
    if status_code == 429:
        return "HTTP 429: the receiver asks the hub to slow down."
    if 300 <= status_code < 400:
        return f"HTTP {status_code}: a redirect, which deliveries do not follow."
    if 400 <= status_code < 500:
        return f"HTTP {status_code}: the receiver refused the request."
    if 500 <= status_code < 600:
        return f"HTTP {status_code}: the receiver failed while handling it."
    return f"HTTP {status_code}: not an answer the hub understands as a success."


@dataclass(frozen=True)
class DeliveryState:
    label: str
    tone: str  # the kit's badge tones: ok, bad, info, warning
    next_attempt_at: datetime | None = None


def delivery_state(status: str, attempts: int, next_attempt_at: datetime | None) -> DeliveryState:
    """A pending delivery with attempts behind it waits for a retry (amber), unlike a new
    one (blue)."""
    if status == DeliveryStatus.SUCCEEDED:
        return DeliveryState("succeeded", "ok")
    if status == DeliveryStatus.FAILED:
        return DeliveryState("failed", "bad")
    if status == DeliveryStatus.PENDING and attempts > 0:
        return DeliveryState("retrying", "warning", next_attempt_at)
    if status == DeliveryStatus.PENDING:
        return DeliveryState("pending", "info")
    return DeliveryState(str(status), "neutral")


@dataclass(frozen=True)
class ProbeVerdict:
    label: str
    tone: str
    sentence: str


def probe_verdict(probe: Probe) -> ProbeVerdict:
    """Only a 2xx answer is green: any other answer reached a server that refused or failed
    the check, which is worth reading before the first delivery."""
    code = probe.status_code
    if not probe.reachable or code is None:
        return ProbeVerdict(
            "unreachable",
            "bad",
            "We could not reach your endpoint"
            + (f": {describe_error(probe.error)}" if probe.error else "."),
        )
    if 200 <= code < 300:
        return ProbeVerdict(
            "reachable", "ok", f"Your endpoint answered our check with HTTP {code}."
        )
    return ProbeVerdict(
        f"answered with {code}",
        "warning",
        f"Your endpoint answered our check (a HEAD request) with HTTP {code}: "
        "deliveries are POSTs and count as delivered only with a 2xx answer.",
    )


def _deliveries(count: int) -> str:
    return f"{count} {'delivery' if count == 1 else 'deliveries'}"


def recovered_sentence(recovered: Mapping[str, int], since: datetime) -> str:
    """What "Recover" queued, by what the deliveries were: {"failed": n, "retrying": m}."""
    when = since.strftime("%Y-%m-%d %H:%M")
    failed, retrying = recovered.get("failed", 0), recovered.get("retrying", 0)
    if not failed and not retrying:
        return (
            f"Nothing to recover: no delivery created since {when} UTC failed or waits for a retry."
        )
    parts = []
    if failed:
        parts.append(f"{_deliveries(failed)} that failed")
    if retrying:
        parts.append(f"{_deliveries(retrying)} waiting for a retry")
    return f"Queued now: {' and '.join(parts)}, created since {when} UTC."


def retried_sentence(queued: int, picked: int) -> str:
    """What "Retry selected" did with the `picked` deliveries: `queued` of them are due now;
    the others had succeeded, were being attempted, or are not this endpoint's."""
    said = f"{_deliveries(queued)} queued for a retry now."
    if queued < picked:
        said += f" {picked - queued} of those ticked were left as they are (succeeded, or being attempted right now)."
    return said


def health_summary(counts: Mapping[str, int]) -> str:
    """An endpoint's last 24 hours in words, every count beside the rate it makes: the
    rate is over finished deliveries, and pending ones are named, not left out."""
    succeeded, failed = counts.get("succeeded", 0), counts.get("failed", 0)
    pending = counts.get("pending", 0)
    if not succeeded + failed + pending:
        return "no deliveries"
    parts = [f"{succeeded} delivered"]
    if failed:
        parts.append(f"{failed} failed")
    if pending:
        parts.append(f"{pending} pending")
    finished = succeeded + failed
    rate = f"{succeeded / finished * 100:.0f} % of finished" if finished else "none finished"
    return f"{', '.join(parts)} ({rate})"
