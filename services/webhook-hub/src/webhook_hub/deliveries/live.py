"""The delivery log's live view: which subscriptions' deliveries changed, told to every API
process after the change is committed (servicekit.live). The worker records every attempt,
new delivery and set-aside one in its batches, so it announces each batch's subscriptions
once, after the batch's commit; the key is the subscription's id."""

from __future__ import annotations

LIVE_SUBJECT = "webhook-hub.live.deliveries"
