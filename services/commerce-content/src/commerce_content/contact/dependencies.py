"""What the contact endpoint gets injected."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends
from servicekit.web_session import SessionDep

from commerce_content.contact.service import ContactService
from commerce_content.settings import SettingsDep


async def get_contact_service(session: SessionDep, settings: SettingsDep) -> ContactService:
    return ContactService(session, settings)


ContactServiceDep = Annotated[ContactService, Depends(get_contact_service)]
