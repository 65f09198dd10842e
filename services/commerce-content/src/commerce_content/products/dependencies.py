"""What the products' endpoints (and the content API's) get injected."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends
from servicekit.web_session import SessionDep

from commerce_content.products.service import ProductService
from commerce_content.settings import SettingsDep


async def get_product_service(session: SessionDep, settings: SettingsDep) -> ProductService:
    return ProductService(session, settings)


ProductServiceDep = Annotated[ProductService, Depends(get_product_service)]
