"""The mail outbox's retry policy and which failures no retry can help: pure decisions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import aiosmtplib
import pytest
from servicekit.mail import UnsendableMail, build_message, is_permanent
from servicekit.mail_outbox import MailRetryPolicy
from servicekit.settings import ServiceSettings


def test_retry_delays_double_from_two_seconds_up_to_an_hour() -> None:
    policy = MailRetryPolicy()
    delays = [policy.delay(n).total_seconds() for n in range(1, 15)]
    assert delays[:6] == [2, 4, 8, 16, 32, 64]
    assert delays[-1] == 3600
    assert max(delays) == 3600
    assert delays == sorted(delays)


def test_retry_delay_stays_at_the_cap_after_any_number_of_failures() -> None:
    assert MailRetryPolicy().delay(10_000) == timedelta(hours=1)


def test_a_message_is_given_up_only_when_older_than_the_max_age() -> None:
    policy = MailRetryPolicy(max_age=timedelta(days=7))
    created = datetime(2026, 11, 1, tzinfo=UTC)
    assert not policy.gives_up(created, created + timedelta(days=6, hours=23))
    assert policy.gives_up(created, created + timedelta(days=7))


def test_an_outage_of_a_day_is_retried_about_30_times_not_dropped() -> None:
    policy = MailRetryPolicy()
    elapsed, attempts = timedelta(0), 0
    while elapsed < timedelta(days=1):
        attempts += 1
        elapsed += policy.delay(attempts)
    assert 25 <= attempts <= 40
    assert not policy.gives_up(datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC))


def test_the_policy_comes_from_the_settings() -> None:
    settings = ServiceSettings(
        mail_retry_first_seconds=5, mail_retry_max_seconds=600, mail_max_age_hours=48
    )
    policy = MailRetryPolicy.of(settings)
    assert policy == MailRetryPolicy(
        timedelta(seconds=5), timedelta(minutes=10), timedelta(hours=48)
    )


def test_a_header_with_a_line_break_makes_an_unsendable_message() -> None:
    with pytest.raises(UnsendableMail):
        build_message(sender="a@x", recipients=["b@x"], subject="Hi\r\nBcc: c@x", body="")


@pytest.mark.parametrize(
    ("error", "permanent"),
    [
        (UnsendableMail("bad header"), True),
        (
            aiosmtplib.SMTPRecipientsRefused([aiosmtplib.SMTPRecipientRefused(550, "no", "b@x")]),
            True,
        ),
        (
            aiosmtplib.SMTPRecipientsRefused(
                [aiosmtplib.SMTPRecipientRefused(451, "later", "b@x")]
            ),
            False,
        ),
        (aiosmtplib.SMTPDataError(554, "rejected"), True),
        (aiosmtplib.SMTPDataError(452, "full"), False),
        (aiosmtplib.SMTPConnectError("refused"), False),
        (aiosmtplib.SMTPAuthenticationError(535, "bad credentials"), False),
        (ConnectionRefusedError(), False),
        (TimeoutError(), False),
    ],
)
def test_only_failures_no_retry_can_help_are_permanent(error: Exception, permanent: bool) -> None:
    assert is_permanent(error) is permanent
