"""The Annotated dependency aliases endpoints take: one `...ServiceDep` per domain, built on
the request's session (servicekit's `SessionDep`) and the app's settings.

They are `async def` although they await nothing: FastAPI runs a plain `def` dependency in
its thread pool, two thread hops per request for no work, which on a loaded machine showed
in the payment webhook's tail latency (bench/subscriptions.py)."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from fastapi import Depends, Request
from servicekit.web.session import SessionDep

from commerce_content.admin_action.service import AuditService
from commerce_content.articles.service import ArticleService
from commerce_content.contact.service import ContactService
from commerce_content.orders.checkout import CheckoutService
from commerce_content.orders.idempotency import IdempotentCheckout
from commerce_content.orders.notifications import PaymentNotificationService
from commerce_content.orders.repository import OrderRepository
from commerce_content.payments.provider import payment_provider
from commerce_content.products.service import ProductService
from commerce_content.search.service import SearchService
from commerce_content.settings import Settings


async def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


SettingsDep = Annotated[Settings, Depends(get_settings)]


async def get_checkout_service(session: SessionDep, settings: SettingsDep) -> CheckoutService:
    return CheckoutService(session, settings, payment_provider(settings))


async def get_idempotent_checkout(session: SessionDep, settings: SettingsDep) -> IdempotentCheckout:
    return IdempotentCheckout(session, timedelta(hours=settings.checkout_idempotency_hours))


async def get_payment_notification_service(
    session: SessionDep, settings: SettingsDep
) -> PaymentNotificationService:
    return PaymentNotificationService(session, settings)


async def get_product_service(session: SessionDep, settings: SettingsDep) -> ProductService:
    return ProductService(session, settings)


async def get_article_service(session: SessionDep) -> ArticleService:
    return ArticleService(session)


async def get_contact_service(session: SessionDep, settings: SettingsDep) -> ContactService:
    return ContactService(session, settings)


async def get_search_service(session: SessionDep) -> SearchService:
    return SearchService(session)


async def get_audit_service(session: SessionDep) -> AuditService:
    return AuditService(session)


async def get_order_repository(session: SessionDep) -> OrderRepository:
    return OrderRepository(session)


CheckoutServiceDep = Annotated[CheckoutService, Depends(get_checkout_service)]
IdempotentCheckoutDep = Annotated[IdempotentCheckout, Depends(get_idempotent_checkout)]
PaymentNotificationServiceDep = Annotated[
    PaymentNotificationService, Depends(get_payment_notification_service)
]
ProductServiceDep = Annotated[ProductService, Depends(get_product_service)]
ArticleServiceDep = Annotated[ArticleService, Depends(get_article_service)]
ContactServiceDep = Annotated[ContactService, Depends(get_contact_service)]
SearchServiceDep = Annotated[SearchService, Depends(get_search_service)]
AuditServiceDep = Annotated[AuditService, Depends(get_audit_service)]
# The sandbox stands in for a provider's hosted page: it reads orders, and decides nothing.
OrderRepositoryDep = Annotated[OrderRepository, Depends(get_order_repository)]
