"""Which of commerce-content's event types carry personal data (webhook-hub delivers those
only to operator-approved owners)."""

from commerce_content.events import INQUIRY_CREATED, registry
from servicekit.events.registry import Visibility


def test_inquiry_created_is_declared_personal_data() -> None:
    assert registry[INQUIRY_CREATED].visibility is Visibility.PERSONAL
