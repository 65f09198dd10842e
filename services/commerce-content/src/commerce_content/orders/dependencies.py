"""What the orders' endpoints (checkout, payment notifications, the sandbox) get injected."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from fastapi import Depends
from servicekit.web_session import SessionDep

from commerce_content.orders.checkout import CheckoutService
from commerce_content.orders.idempotency import IdempotentCheckout
from commerce_content.orders.notifications import PaymentNotificationService
from commerce_content.orders.repository import OrderRepository
from commerce_content.payments.provider import payment_provider
from commerce_content.settings import SettingsDep


async def get_checkout_service(session: SessionDep, settings: SettingsDep) -> CheckoutService:
    return CheckoutService(session, settings, payment_provider(settings))


async def get_idempotent_checkout(session: SessionDep, settings: SettingsDep) -> IdempotentCheckout:
    return IdempotentCheckout(session, timedelta(hours=settings.checkout_idempotency_hours))


async def get_payment_notification_service(
    session: SessionDep, settings: SettingsDep
) -> PaymentNotificationService:
    return PaymentNotificationService(session, settings)


async def get_order_repository(session: SessionDep) -> OrderRepository:
    return OrderRepository(session)


CheckoutServiceDep = Annotated[CheckoutService, Depends(get_checkout_service)]
IdempotentCheckoutDep = Annotated[IdempotentCheckout, Depends(get_idempotent_checkout)]
PaymentNotificationServiceDep = Annotated[
    PaymentNotificationService, Depends(get_payment_notification_service)
]
OrderRepositoryDep = Annotated[OrderRepository, Depends(get_order_repository)]
