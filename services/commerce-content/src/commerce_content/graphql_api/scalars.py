"""`Decimal` and `CurrencyCode`: money never travels as a float."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any, NewType

import strawberry
from strawberry.types.scalar import ScalarDefinition

from commerce_content.graphql_api.errors import InvalidInput

DECIMAL_TEXT = re.compile(r"^-?\d{1,18}(\.\d{1,8})?$")

# ISO 4217 active codes (2024 list), without funds and precious-metal codes.
ISO_4217 = frozenset(
    [
        "AED",
        "AFN",
        "ALL",
        "AMD",
        "ANG",
        "AOA",
        "ARS",
        "AUD",
        "AWG",
        "AZN",
        "BAM",
        "BBD",
        "BDT",
        "BGN",
        "BHD",
        "BIF",
        "BMD",
        "BND",
        "BOB",
        "BRL",
        "BSD",
        "BTN",
        "BWP",
        "BYN",
        "BZD",
        "CAD",
        "CDF",
        "CHF",
        "CLP",
        "CNY",
        "COP",
        "CRC",
        "CUP",
        "CVE",
        "CZK",
        "DJF",
        "DKK",
        "DOP",
        "DZD",
        "EGP",
        "ERN",
        "ETB",
        "EUR",
        "FJD",
        "FKP",
        "GBP",
        "GEL",
        "GHS",
        "GIP",
        "GMD",
        "GNF",
        "GTQ",
        "GYD",
        "HKD",
        "HNL",
        "HTG",
        "HUF",
        "IDR",
        "ILS",
        "INR",
        "IQD",
        "IRR",
        "ISK",
        "JMD",
        "JOD",
        "JPY",
        "KES",
        "KGS",
        "KHR",
        "KMF",
        "KPW",
        "KRW",
        "KWD",
        "KYD",
        "KZT",
        "LAK",
        "LBP",
        "LKR",
        "LRD",
        "LSL",
        "LYD",
        "MAD",
        "MDL",
        "MGA",
        "MKD",
        "MMK",
        "MNT",
        "MOP",
        "MRU",
        "MUR",
        "MVR",
        "MWK",
        "MXN",
        "MYR",
        "MZN",
        "NAD",
        "NGN",
        "NIO",
        "NOK",
        "NPR",
        "NZD",
        "OMR",
        "PAB",
        "PEN",
        "PGK",
        "PHP",
        "PKR",
        "PLN",
        "PYG",
        "QAR",
        "RON",
        "RSD",
        "RUB",
        "RWF",
        "SAR",
        "SBD",
        "SCR",
        "SDG",
        "SEK",
        "SGD",
        "SHP",
        "SLE",
        "SOS",
        "SRD",
        "SSP",
        "STN",
        "SVC",
        "SYP",
        "SZL",
        "THB",
        "TJS",
        "TMT",
        "TND",
        "TOP",
        "TRY",
        "TTD",
        "TWD",
        "TZS",
        "UAH",
        "UGX",
        "USD",
        "UYU",
        "UZS",
        "VED",
        "VES",
        "VND",
        "VUV",
        "WST",
        "XAF",
        "XCD",
        "XCG",
        "XOF",
        "XPF",
        "YER",
        "ZAR",
        "ZMW",
        "ZWG",
    ]
)


def serialize_decimal(value: Decimal) -> str:
    # Fixed-point text: "19.90", never "1.99E+1". `str` writes the same text several times
    # faster (a page has hundreds of prices) unless it chooses an exponent.
    text = str(value)
    return format(value, "f") if "E" in text else text


def parse_decimal(value: Any) -> Decimal:
    """Strings of plain digits only: a JSON number may already have lost its exact value, and
    "NaN", "Infinity" or "1e1000000" are no prices."""
    if not isinstance(value, str) or not DECIMAL_TEXT.fullmatch(value):
        raise InvalidInput(
            'Decimal values are strings of digits with an optional fraction, like "19.90"'
        )
    try:
        return Decimal(value)
    except InvalidOperation as exc:  # pragma: no cover - the pattern admits valid text only
        raise InvalidInput(f"not a decimal: {value!r}") from exc


def parse_currency(value: Any) -> str:
    if not isinstance(value, str) or value not in ISO_4217:
        raise InvalidInput('CurrencyCode values are ISO 4217 codes in capitals, like "USD"')
    return value


CurrencyCode = NewType("CurrencyCode", str)

# Passed to the schema's `scalar_map`: `Decimal` and `CurrencyCode` annotations in the types
# become these scalars.
SCALARS: dict[object, ScalarDefinition] = {
    Decimal: strawberry.scalar(
        name="Decimal",
        description=(
            'An exact decimal number, sent and received as a string ("19.90"), never as a float.'
        ),
        serialize=serialize_decimal,
        parse_value=parse_decimal,
        specified_by_url="https://speleotrove.com/decimal/decarith.html",
    ),
    CurrencyCode: strawberry.scalar(
        name="CurrencyCode",
        description='A currency as its ISO 4217 three-letter code in capitals, like "USD".',
        serialize=str.upper,
        parse_value=parse_currency,
        specified_by_url="https://www.iso.org/iso-4217-currency-codes.html",
    ),
}
