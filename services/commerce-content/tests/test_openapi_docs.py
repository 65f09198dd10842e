"""Every operation of the service documents itself: a summary, a description, and examples
of its request body and of its success response (issue 14, defect 5)."""

from __future__ import annotations

import httpx
from servicekit.testing.openapi_docs import undocumented_operations


async def test_every_operation_has_a_summary_a_description_and_examples(
    client: httpx.AsyncClient,
) -> None:
    document = (await client.get("/openapi.json")).json()
    assert undocumented_operations(document) == []


async def test_the_checkout_example_spells_the_address_in_camel_case(
    client: httpx.AsyncClient,
) -> None:
    document = (await client.get("/openapi.json")).json()
    checkout = document["paths"]["/api/orders/checkout"]["post"]
    example = checkout["requestBody"]["content"]["application/json"]["example"]
    assert example["shippingAddress"]["postalCode"]
    assert example["items"][0]["productId"].isdigit()
