"""webhook-hub's endpoint guard is servicekit's shared address policy: every internal form is
refused (that the sender connects only to the address that was checked: test_sender.py)."""

from __future__ import annotations

import pytest
from webhook_hub.delivery_engine.endpoint_policy import (
    EndpointGuard,
    EndpointRefused,
    check_headers,
)

# Literals only: the guard decides without sending anything anywhere.
INTERNAL = [
    "http://[::1]/hook",
    "http://169.254.169.254/latest/meta-data/iam/",
    "http://100.100.100.200/latest/meta-data/",
    "http://100.64.0.1/hook",
    "http://100.127.255.254/hook",
    "http://192.0.0.192/opc/v2/",
    "http://[2002:7f00:1::]/hook",
    "http://[2002:a9fe:a9fe::]/hook",
    "http://[64:ff9b::7f00:1]/hook",
    "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/hook",
    "http://[::ffff:127.0.0.1]/hook",
    "http://2130706433/hook",
    "http://0x7f.1/hook",
    "http://0177.0.0.1/hook",
]


@pytest.mark.parametrize("url", INTERNAL)
async def test_the_guard_refuses_every_internal_address_form(url: str) -> None:
    with pytest.raises(EndpointRefused):
        await EndpointGuard().check(url)


async def test_metadata_stays_refused_inside_an_allowed_network() -> None:
    with pytest.raises(EndpointRefused):
        await EndpointGuard(["169.254.0.0/16"]).check("http://169.254.169.254/")


@pytest.mark.parametrize("name", ["Transfer-Encoding", "Connection", "Metadata-Flavor"])
def test_transport_and_metadata_headers_are_refused(name: str) -> None:
    with pytest.raises(EndpointRefused):
        check_headers({name: "x"})


async def test_the_guard_remembers_a_bounded_number_of_checked_endpoints() -> None:
    """Each distinct endpoint checked adds an entry; the oldest go past the bound, so the
    memory does not grow with the number of endpoints ever seen."""
    guard = EndpointGuard(["127.0.0.0/8"], max_remembered=100)
    for port in range(1000, 1500):
        await guard.check(f"http://127.0.0.1:{port}/hook")
    assert guard.remembered == 100
