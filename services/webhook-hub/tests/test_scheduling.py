"""Per-subscription queues and admission, as a pure state machine (no database, no loop)."""

from __future__ import annotations

import random
import uuid
from collections import Counter

from webhook_hub.delivery_engine.admission import owner_share
from webhook_hub.delivery_engine.jobs import DeliveryJob
from webhook_hub.delivery_engine.scheduling import Scheduler, wake_claims_on_free_slot

from tests.job_factories import make_job


def scheduler(capacity: int = 512, per_subscription: int = 2, floor: int = 16) -> Scheduler:
    return Scheduler(capacity=capacity, per_subscription=per_subscription, owner_floor=floor)


def one_sending_one_waiting() -> tuple[Scheduler, DeliveryJob, DeliveryJob]:
    """A subscription capped at one attempt: its first job in flight, its second queued."""
    s = scheduler(per_subscription=1)
    sub = uuid.uuid4()
    first, second = make_job(sub), make_job(sub)
    s.offer(first, 0.0)
    s.offer(second, 0.0)
    return s, first, second


def test_a_job_with_room_starts_at_once() -> None:
    s = scheduler()
    assert s.offer(make_job(), 0.0)
    assert (s.in_flight, s.waiting) == (1, 0)


def test_a_subscription_at_its_cap_queues_further_jobs() -> None:
    s = scheduler(per_subscription=2)
    sub = uuid.uuid4()
    assert [s.offer(make_job(sub), 0.0) for _ in range(3)] == [True, True, False]
    assert s.queue_depths() == {sub: 1}


def test_a_newcomer_joins_its_subscriptions_queue_instead_of_overtaking_it() -> None:
    s, first, _ = one_sending_one_waiting()
    third = make_job(first.subscription_id)
    assert not s.offer(third, 0.0)
    assert s.queue_depths() == {first.subscription_id: 2}


def test_a_finished_attempt_hands_its_slot_to_its_subscriptions_next_job() -> None:
    s, first, second = one_sending_one_waiting()
    assert s.finish(first) == (second, [])
    assert (s.in_flight, s.waiting, s.queue_depths()) == (1, 0, {})


def test_other_subscriptions_are_not_held_up_by_a_saturated_one() -> None:
    s = scheduler(per_subscription=1)
    slow = uuid.uuid4()
    s.offer(make_job(slow), 0.0)
    s.offer(make_job(slow), 0.0)
    assert s.offer(make_job(uuid.uuid4()), 0.0)


def test_the_worker_cap_holds_whatever_the_subscriptions() -> None:
    s = scheduler(capacity=20, per_subscription=100, floor=2)
    started = [s.offer(make_job(), 0.0) for _ in range(25)]
    # One owner alone keeps the last `floor` slots free for a newcomer.
    assert started.count(True) == 18
    assert s.offer(make_job(owner="newcomer"), 0.0)


def test_a_slot_freed_by_an_owner_over_its_share_goes_to_the_waiting_owner() -> None:
    s = scheduler(capacity=8, per_subscription=100, floor=1)
    a_jobs = [make_job(owner="a") for _ in range(7)]
    for job in a_jobs:
        assert s.offer(job, 0.0)
    late_a = make_job(owner="a")
    assert not s.offer(late_a, 0.0)  # a alone leaves the reserve slot free
    assert s.offer(make_job(owner="b"), 0.0)  # b, new, takes the reserve
    waiting_b = make_job(owner="b")
    assert not s.offer(waiting_b, 0.0)
    assert s.finish(a_jobs[0]) == (None, [])  # 7 of 8 in flight: the reserve again
    # a holds 5 with a share of 4: the slot goes to b although a queued first.
    assert s.finish(a_jobs[1]) == (None, [waiting_b])
    assert s.queue_depths() == {late_a.subscription_id: 1}


def test_jobs_that_waited_too_long_are_handed_back_to_be_set_aside() -> None:
    s = scheduler(per_subscription=1)
    sub = uuid.uuid4()
    s.offer(make_job(sub), 0.0)
    old, young = make_job(sub), make_job(sub)
    s.offer(old, 1.0)
    s.offer(young, 5.0)
    aside, started = s.stale(oldest=2.0)
    assert (aside, started) == ([old], [])
    assert s.queue_depths() == {sub: 1}


def test_setting_aside_an_owners_queue_enlarges_the_others_shares() -> None:
    s = scheduler(capacity=4, per_subscription=10, floor=1)
    for _ in range(3):
        s.offer(make_job(owner="a"), 0.0)
    s.offer(make_job(owner="b"), 0.0)
    late_a = make_job(owner="a")
    s.offer(late_a, 10.0)
    stuck_b = make_job(owner="b")
    s.offer(stuck_b, 0.0)
    aside, started = s.stale(oldest=1.0)
    assert aside == [stuck_b]
    assert started == []  # all four slots are still taken
    assert s.waiting == 1


def test_an_abandoned_attempt_frees_its_slot_for_a_waiting_job() -> None:
    s, first, second = one_sending_one_waiting()
    assert s.abandon(first) == [second]
    assert s.in_flight == 1


def one_subscription_at_its_cap() -> tuple[Scheduler, uuid.UUID]:
    s = scheduler(capacity=40, per_subscription=2, floor=16)
    sub = uuid.uuid4()
    s.offer(make_job(sub), 0.0)
    s.offer(make_job(sub), 0.0)
    return s, sub


def test_claim_limits_exclude_saturated_subscriptions_and_owners() -> None:
    s, sub = one_subscription_at_its_cap()
    limits = s.claim_limits(batch=1000)
    assert limits.saturated == [sub]
    assert limits.limit == 38
    assert limits.held_back
    assert limits.per_owner == 20  # two owners' share: acme and the one a claim may bring


def test_a_full_worker_claims_nothing() -> None:
    s = scheduler(capacity=2, per_subscription=5, floor=1)
    s.offer(make_job(owner="a"), 0.0)
    s.offer(make_job(owner="b"), 0.0)
    assert s.claim_limits(batch=1000).limit == 0


def test_a_claim_that_left_nothing_due_behind_is_not_woken_by_finished_attempts() -> None:
    s = scheduler(capacity=512, per_subscription=64, floor=16)
    s.offer(make_job(), 0.0)  # a delivery in flight: fewer free slots than a claim batch
    limits = s.claim_limits(batch=1000)
    claimed = [(uuid.uuid4(), "acme")] * 3
    assert not wake_claims_on_free_slot(limits, claimed, excluded_due=False)


def test_due_deliveries_of_a_subscription_at_its_cap_wake_the_claims_when_a_slot_frees() -> None:
    s, _ = one_subscription_at_its_cap()
    limits = s.claim_limits(batch=1000)
    assert wake_claims_on_free_slot(limits, [], excluded_due=True)
    assert not wake_claims_on_free_slot(limits, [], excluded_due=False)


def test_a_claim_that_took_all_its_free_slots_is_woken_when_one_frees() -> None:
    s = scheduler(capacity=4, per_subscription=5, floor=1)
    s.offer(make_job(owner="a"), 0.0)
    limits = s.claim_limits(batch=1000)
    claimed = [(uuid.uuid4(), owner) for owner in ("b", "c", "d")]
    assert limits.limit == 3
    assert wake_claims_on_free_slot(limits, claimed, excluded_due=False)


def test_a_claim_cut_at_a_subscriptions_cap_is_woken_when_a_slot_frees() -> None:
    s = scheduler(capacity=512, per_subscription=2, floor=16)
    limits = s.claim_limits(batch=1000)
    sub = uuid.uuid4()
    assert wake_claims_on_free_slot(limits, [(sub, "acme"), (sub, "acme")], excluded_due=False)


def test_a_claim_cut_at_an_owners_share_is_woken_when_a_slot_frees() -> None:
    s = scheduler(capacity=8, per_subscription=64, floor=1)
    s.offer(make_job(owner="busy"), 0.0)  # two owners: each gets a share, not all the slots
    limits = s.claim_limits(batch=1000)
    claimed = [(uuid.uuid4(), "acme") for _ in range(limits.per_owner)]
    assert len(claimed) < limits.limit
    assert wake_claims_on_free_slot(limits, claimed, excluded_due=False)


def test_a_full_worker_wakes_its_claims_when_a_slot_frees() -> None:
    s = scheduler(capacity=1, per_subscription=5, floor=1)
    s.offer(make_job(), 0.0)
    assert wake_claims_on_free_slot(s.claim_limits(batch=1000), [], excluded_due=False)


def test_any_sequence_of_offers_and_finishes_keeps_the_counts_and_caps_true() -> None:
    """Against a model of the same events (which jobs are in flight, how many wait), whichever
    way a freed slot goes (handed to the subscription's next job, or pumped): the counts stay
    true, no cap is passed, and no job waits that could start."""
    rng = random.Random(17)
    s = scheduler(capacity=24, per_subscription=3, floor=4)
    subscriptions = [(uuid.uuid4(), f"owner-{n % 3}") for n in range(6)]
    owner_of = dict(subscriptions)
    in_flight: list[DeliveryJob] = []
    offered = finished = 0
    for _ in range(5000):
        if in_flight and rng.random() < 0.5:
            done = in_flight.pop(rng.randrange(len(in_flight)))
            finished += 1
            next_job, started = s.finish(done)
            in_flight += ([next_job] if next_job else []) + started
        else:
            subscription, owner = rng.choice(subscriptions)
            job = make_job(subscription, owner=owner)
            offered += 1
            if s.offer(job, 0.0):
                in_flight.append(job)
        assert s.in_flight == len(in_flight) <= 24
        assert s.waiting == sum(s.queue_depths().values()) == offered - finished - len(in_flight)
        per_subscription = Counter(job.subscription_id for job in in_flight)
        assert max(per_subscription.values(), default=0) <= 3
        for waiting in s.queue_depths():
            assert per_subscription[waiting] == 3 or not s.admissible(owner_of[waiting])
        # Shares count the owners with work here (in flight or waiting), and only those.
        busy = {job.owner for job in in_flight} | {owner_of[w] for w in s.queue_depths()}
        assert s.claim_limits(100).per_owner == owner_share(24, len(busy) + 1, 4)
