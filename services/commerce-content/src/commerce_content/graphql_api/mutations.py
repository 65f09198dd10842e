"""The Mutation root. Every mutation returns a payload with `userErrors`; business problems
are user errors, unexpected failures go to the standard `errors` array.

Each mutation runs in its own savepoint: one that reports user errors changes nothing, and
later mutations of the same request are not affected.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from enum import Enum
from typing import Any

import strawberry
from graphql import GraphQLError

from commerce_content.content_api.notifier import notify_content_saved
from commerce_content.errors import (
    AlreadyDone,
    CheckoutError,
    IdempotencyKeyReused,
    InvalidProduct,
    InvalidRequest,
    ProductError,
    ProductNotFound,
    ProductUnavailable,
    UnknownCategory,
)
from commerce_content.graphql_api.context import Context
from commerce_content.graphql_api.directives import guarded_field
from commerce_content.graphql_api.errors import BAD_USER_INPUT
from commerce_content.graphql_api.ids import InvalidIdentifier, category_key, decode_id
from commerce_content.graphql_api.inputs import (
    AddressInput,
    CreateOrderInput,
    OrderLineInput,
    ProductCreateInput,
    ProductUpdateInput,
    given,
)
from commerce_content.graphql_api.types import Order, Product
from commerce_content.identity.roles import Role
from commerce_content.orders import idempotency
from commerce_content.orders.checkout import CartLine, CheckoutResult, CheckoutService
from commerce_content.orders.repository import OrderRepository
from commerce_content.payments.provider import payment_provider
from commerce_content.products.service import ProductService, SavedProduct

MAX_ORDER_LINES = 100
IDEMPOTENCY_KEY_REUSED = "IDEMPOTENCY_KEY_REUSED"
IDEMPOTENCY_KEY_IN_USE = "IDEMPOTENCY_KEY_IN_USE"
CREATE_ORDER_RATE = (5, "10s")


@strawberry.enum(description="Why an order could not be created.")
class OrderErrorCode(Enum):
    INSUFFICIENT_STOCK = "INSUFFICIENT_STOCK"
    INVALID_ADDRESS = "INVALID_ADDRESS"
    PAYMENT_DECLINED = "PAYMENT_DECLINED"
    PRODUCT_UNAVAILABLE = "PRODUCT_UNAVAILABLE"


@strawberry.type(description="A problem with the input of a mutation, for the person using it.")
class UserError:
    field: list[str] | None = strawberry.field(
        description='Path to the input field at fault, e.g. ["input", "items", "0"].'
    )
    message: str
    code: OrderErrorCode | None


@strawberry.enum(description="Why a product could not be saved.")
class ProductErrorCode(Enum):
    NOT_FOUND = "NOT_FOUND"
    DUPLICATE_SLUG = "DUPLICATE_SLUG"
    INVALID = "INVALID"
    UNKNOWN_CATEGORY = "UNKNOWN_CATEGORY"


@strawberry.type(description="A problem with the input of a product mutation.")
class ProductUserError:
    field: list[str] | None
    message: str
    code: ProductErrorCode


@strawberry.type
class CreateOrderPayload:
    order: Order | None
    user_errors: list[UserError]


@strawberry.type
class ProductPayload:
    product: Product | None
    user_errors: list[ProductUserError]


@strawberry.type
class DeleteProductPayload:
    deleted_id: strawberry.ID | None
    user_errors: list[ProductUserError]


INPUT = "input"


def order_user_error(error: CheckoutError) -> UserError:
    """The same checkout errors REST answers with their status, as a `userErrors` entry."""
    return UserError(
        field=[INPUT, *error.field] if error.field else None,
        message=error.detail,
        code=OrderErrorCode(error.order_code) if error.order_code else None,
    )


def _cart(items: list[OrderLineInput]) -> list[CartLine]:
    lines = []
    for index, item in enumerate(items):
        try:
            product_id = decode_id(item.product_id, "Product")
        except InvalidIdentifier as exc:
            raise ProductUnavailable(
                f"items[{index}]: {item.product_id!r} is not a product id",
                field=("items", str(index), "productId"),
            ) from exc
        lines.append(CartLine(str(product_id), item.quantity))
    return lines


def _check_order_input(input: CreateOrderInput) -> None:
    """What only GraphQL's input can get wrong; the checkout service checks the rest (an empty
    cart and the email included)."""
    if len(input.items) > MAX_ORDER_LINES:
        raise CheckoutError(f"at most {MAX_ORDER_LINES} items", field=("items",))


def _as_json(value: Any) -> Any:
    """The input as plain JSON values, for the idempotency key's fingerprint (UNSET, an
    omitted field, is left out like an absent JSON member)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: _as_json(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if getattr(value, f.name) is not strawberry.UNSET
        }
    if isinstance(value, list):
        return [_as_json(item) for item in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)


def _address(address: AddressInput | None) -> dict[str, Any] | None:
    if address is None:
        return None
    values = {
        "name": address.name,
        "line1": address.line1,
        "line2": given(address.line2),
        "city": address.city,
        "postal_code": address.postal_code,
        "state": given(address.state),
        "country": address.country,
    }
    return {key: value for key, value in values.items() if value is not None}


def product_user_errors(errors: list[ProductError]) -> list[ProductUserError]:
    """The same product errors the content API answers with their status."""
    return [
        ProductUserError(
            field=_error_path(e.field),
            message=e.message,
            code=ProductErrorCode(e.product_code),
        )
        for e in errors
    ]


def _error_path(path: tuple[str, ...]) -> list[str] | None:
    """`id` is an argument of its own; everything else is a field of `input`."""
    if not path:
        return None
    if path == ("id",):
        return ["id"]
    return [INPUT, *(strawberry_name(part) for part in path)]


def strawberry_name(python_name: str) -> str:
    head, *rest = python_name.split("_")
    return head + "".join(part.title() for part in rest)


def _categories(values: list[strawberry.ID] | None) -> list[int] | None:
    if values is None:
        return None
    ids = []
    for value in values:
        try:
            ids.append(category_key(value))
        except InvalidIdentifier as exc:
            raise UnknownCategory(f"not a category id: {value!r}", field=("category_ids",)) from exc
    return ids


def _product_id(value: strawberry.ID) -> int:
    try:
        return decode_id(value, "Product")
    except InvalidIdentifier as exc:
        raise ProductNotFound("No such product", field=("id",)) from exc


def _announce(info: Context, saved: SavedProduct) -> None:
    """The content-saved notification, sent after the response and so after the commit."""
    product = saved.product
    info.context.background_tasks.add_task(
        notify_content_saved,
        info.context.settings,
        saved.kind,
        product.id,
        product.slug,
        product.published,
    )


def _update_values(changes: ProductUpdateInput) -> dict[str, Any]:
    values = {
        name: getattr(changes, name)
        for name in (
            "name",
            "slug",
            "description",
            "base_price",
            "sale_price",
            "stock",
            "image",
            "tags",
            "menu_index",
        )
    }
    return {name: value for name, value in values.items() if value is not strawberry.UNSET}


ProductAction = Any  # a coroutine function of the service returning SavedProduct


async def _save_product(info: Context, action: ProductAction) -> ProductPayload:
    async with info.context.db() as session:
        try:
            async with session.begin_nested():
                saved: SavedProduct = await action(ProductService(session, info.context.settings))
        except InvalidProduct as invalid:
            return ProductPayload(product=None, user_errors=product_user_errors(invalid.problems))
        except ProductError as error:
            return ProductPayload(product=None, user_errors=product_user_errors([error]))
    _announce(info, saved)
    product = Product.of(saved.product, info.context.variants_by_product)
    return ProductPayload(product=product, user_errors=[])


@strawberry.type
class Mutation:
    @guarded_field(
        rate_limit=CREATE_ORDER_RATE,
        description=(
            "Check out: prices come from the catalogue; the order is pending until paid at its"
            " `paymentUrl`."
        ),
    )
    async def create_order(self, info: Context, input: CreateOrderInput) -> CreateOrderPayload:
        context = info.context
        try:
            key = idempotency.parse_key(context.request.headers.get(idempotency.HEADER))
        except InvalidRequest as exc:
            raise GraphQLError(exc.message, extensions={"code": BAD_USER_INPUT}) from exc
        email = given(input.customer_email)
        user_id = context.caller.user_id if context.caller is not None else None
        async with context.db() as session:
            service = CheckoutService(session, context.settings, payment_provider(context.settings))
            once = idempotency.IdempotentCheckout(
                session, timedelta(hours=context.settings.checkout_idempotency_hours)
            )

            async def run() -> CheckoutResult:
                _check_order_input(input)
                return await service.checkout(
                    _cart(input.items), email, _address(given(input.shipping_address)), user_id
                )

            try:
                # The key's claim is inside the savepoint: a refused cart holds no key.
                async with session.begin_nested():
                    answer = await once.run(
                        idempotency.scope_of(context.caller),
                        key,
                        idempotency.fingerprint(idempotency.GRAPHQL_SURFACE, _as_json(input)),
                        run,
                    )
            except CheckoutError as error:
                return CreateOrderPayload(order=None, user_errors=[order_user_error(error)])
            except IdempotencyKeyReused as exc:
                raise GraphQLError(
                    exc.message, extensions={"code": IDEMPOTENCY_KEY_REUSED}
                ) from exc
            except AlreadyDone as exc:
                raise GraphQLError(
                    exc.message, extensions={"code": IDEMPOTENCY_KEY_IN_USE}
                ) from exc
            order = await OrderRepository(session).get(answer.order_id)
        if order is None:  # the order was just made or read in this transaction
            raise RuntimeError(f"order {answer.order_id} vanished")
        return CreateOrderPayload(order=Order.of(order), user_errors=[])

    @guarded_field(auth=Role.MANAGER, description="Create a product (a draft unless published).")
    async def create_product(
        self, info: Context, input: ProductCreateInput
    ) -> ProductPayload | None:
        values = {
            "name": input.name,
            "slug": input.slug,
            "description": input.description,
            "base_price": input.base_price,
            "sale_price": given(input.sale_price),
            "stock": input.stock,
            "image": input.image,
            "tags": input.tags,
            "menu_index": input.menu_index,
            "published": input.published,
        }

        async def action(service: ProductService) -> SavedProduct:
            return await service.create(values, _categories(given(input.category_ids)))

        return await _save_product(info, action)

    @guarded_field(auth=Role.MANAGER, description="Change a product's fields.")
    async def update_product(
        self, info: Context, id: strawberry.ID, input: ProductUpdateInput
    ) -> ProductPayload | None:
        categories = input.category_ids

        async def action(service: ProductService) -> SavedProduct:
            return await service.update(
                _product_id(id),
                _update_values(input),
                _categories(given(categories)),
            )

        return await _save_product(info, action)

    @guarded_field(auth=Role.MANAGER, description="Publish a product, or withdraw it.")
    async def publish_product(
        self, info: Context, id: strawberry.ID, published: bool = True
    ) -> ProductPayload | None:
        async def action(service: ProductService) -> SavedProduct:
            return await service.set_published(_product_id(id), published)

        return await _save_product(info, action)

    @guarded_field(auth=Role.MANAGER, description="Delete a product (orders keep their lines).")
    async def delete_product(self, info: Context, id: strawberry.ID) -> DeleteProductPayload | None:
        payload = await _save_product(info, lambda service: service.delete(_product_id(id)))
        return DeleteProductPayload(
            deleted_id=id if payload.product is not None else None,
            user_errors=payload.user_errors,
        )
