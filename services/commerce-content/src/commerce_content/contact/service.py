"""Contact inquiries: stored `new`, mailed to the administrators, published as
`inquiry.created`, all in the caller's transaction."""

from __future__ import annotations

from servicekit.db.models import MailMessage
from servicekit.events import record_event
from sqlmodel.ext.asyncio.session import AsyncSession

from commerce_content.events import INQUIRY_CREATED, InquiryCreated
from commerce_content.models import Inquiry
from commerce_content.settings import Settings


class ContactService:
    def __init__(self, session: AsyncSession, settings: Settings) -> None:
        self.session = session
        self.settings = settings

    async def submit(self, name: str, email: str, message: str) -> Inquiry:
        inquiry = Inquiry(name=name, email=email, message=message)
        self.session.add(inquiry)
        await self.session.flush()
        for admin in self.settings.admin_emails:
            self.session.add(
                MailMessage(
                    recipient=admin,
                    subject=f"New inquiry from {name}",
                    body=f"From: {name} <{email}>\nInquiry #{inquiry.id}\n\n{message}\n",
                )
            )
        await record_event(
            self.session,
            INQUIRY_CREATED,
            InquiryCreated(
                id=inquiry.id, name=name, email=email, message=message, status=inquiry.status
            ),
        )
        return inquiry
