"""The shared address policy: every spelling of an internal address is refused, public ones
pass, allowed networks are honoured (metadata never), and the aiohttp guard connects only to
the address it checked, whatever DNS answers next."""

from __future__ import annotations

import ipaddress
from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiohttp
import pytest
from aiohttp import web
from servicekit.net import (
    AddressPolicy,
    AddressRefused,
    check_url,
    embedded_ipv4,
    guarded_connector,
    host_address,
    literal_refusal,
    pinned_http_url,
    proxy_target,
    refusal_of,
    refused_header,
)
from servicekit.testing.resolver import ScriptedResolver

STRICT = AddressPolicy()

REFUSED_URLS = [
    "http://[::1]:8080/internal-admin",
    "http://127.0.0.1/",
    "http://localhost.:80/x".replace("localhost.", "127.0.0.9"),
    "http://0.0.0.0/",
    "http://[::]/",
    "http://169.254.169.254/latest/meta-data/iam/",
    "http://100.100.100.200/latest/meta-data/",
    "http://192.0.0.192/opc/v2/",
    "http://168.63.129.16/machine",
    "http://[fd00:ec2::254]/latest/meta-data/",
    "http://100.64.0.1/",
    "http://100.127.255.254/",
    "http://10.1.2.3/",
    "http://172.16.0.1/",
    "http://192.168.1.1/",
    "http://169.254.1.1/",
    "http://198.18.0.1/",
    "http://192.0.2.1/",
    "http://224.0.0.1/",
    "http://255.255.255.255/",
    "http://[fc00::1]/",
    "http://[fe80::1]/",
    "http://[ff02::1]/",
    "http://[2002:7f00:1::]/",
    "http://[2002:a9fe:a9fe::]/",
    "http://[2002:0a00:0001::1]/",
    "http://[64:ff9b::7f00:1]/",
    "http://[64:ff9b::a9fe:a9fe]/",
    "http://[64:ff9b:1::a00:1]/",
    "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/",
    "http://[2001:0:7f00:1:0:0:0:1]/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:7f00:1]/",
    "http://[::ffff:169.254.169.254]/",
    "http://[::ffff:0:127.0.0.1]/",
    "http://[::127.0.0.1]/",
    "http://2130706433/",
    "http://0x7f.1/",
    "http://0x7f000001/",
    "http://0177.0.0.1/",
    "http://017700000001/",
    "http://127.1/",
    "http://127.0.1/",
    "http://0/",
    "http://2852039166/",
    "http://0xa9.0xfe.0xa9.0xfe/",
    "http://127.0.0.1.:81/",
]
ACCEPTED_URLS = [
    "http://8.8.8.8/",
    "https://1.1.1.1:8443/x",
    "http://[2606:4700:4700::1111]/",
    "http://[2002:808:808::]/",
    "http://[64:ff9b::808:808]/",
    "http://[::ffff:8.8.8.8]/",
    "http://134744072/",
    "http://example.com/",
    "http://a1.example/",
]


@pytest.mark.parametrize("url", REFUSED_URLS)
def test_internal_address_forms_are_refused(url: str) -> None:
    assert literal_refusal(url, STRICT) is not None


@pytest.mark.parametrize("url", ACCEPTED_URLS)
def test_public_addresses_and_host_names_pass_the_literal_check(url: str) -> None:
    assert literal_refusal(url, STRICT) is None


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("2130706433", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("10.0.258", "10.0.1.2"),
        ("0xA9FEA9FE", "169.254.169.254"),
        ("[::1]", "::1"),
        ("example.com", None),
        ("1.example", None),
    ],
)
def test_host_spellings_are_read_as_url_parsers_read_them(host: str, address: str | None) -> None:
    expected = None if address is None else ipaddress.ip_address(address)
    assert host_address(host) == expected


@pytest.mark.parametrize("host", ["256.1.1.1", "1.2.3.4.5", "09.1.1.1", "1.2.3.08", "1.16777216"])
def test_a_host_ending_in_a_number_that_is_no_address_is_refused(host: str) -> None:
    assert literal_refusal(f"http://{host}/", STRICT) is not None


@pytest.mark.parametrize(
    ("address", "carried"),
    [
        ("::ffff:127.0.0.1", ["127.0.0.1"]),
        ("2002:7f00:1::", ["127.0.0.1"]),
        ("64:ff9b::a9fe:a9fe", ["169.254.169.254"]),
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", ["65.54.227.120", "192.0.2.45"]),
        ("::7f00:1", ["127.0.0.1"]),
        ("2606:4700::1111", []),
        ("::1", []),
    ],
)
def test_ipv6_forms_are_unwrapped_to_the_ipv4_they_carry(address: str, carried: list[str]) -> None:
    assert embedded_ipv4(ipaddress.ip_address(address)) == [
        ipaddress.IPv4Address(a) for a in carried
    ]


def test_allowed_networks_let_their_addresses_through() -> None:
    policy = AddressPolicy.allowing(["127.0.0.0/8", "::1/128"])
    assert policy.refusal(ipaddress.ip_address("127.0.0.1")) is None
    assert policy.refusal(ipaddress.ip_address("::1")) is None
    assert policy.refusal(ipaddress.ip_address("::ffff:127.0.0.1")) is None
    assert policy.refusal(ipaddress.ip_address("10.0.0.1")) is not None


def test_metadata_addresses_are_refused_even_inside_an_allowed_network() -> None:
    policy = AddressPolicy.allowing(["100.64.0.0/10", "fd00::/8"])
    assert policy.refusal(ipaddress.ip_address("100.64.1.1")) is None
    for metadata in ("169.254.169.254", "100.100.100.200", "fd00:ec2::254", "2002:a9fe:a9fe::"):
        assert "metadata" in (policy.refusal(ipaddress.ip_address(metadata)) or "")


@pytest.mark.parametrize(
    "address", ["169.254.1.1", "169.254.0.1", "fe80::1", "febf::1", "::ffff:169.254.7.7"]
)
def test_link_local_addresses_are_refused_even_inside_an_allowed_network(address: str) -> None:
    policy = AddressPolicy.allowing(["169.254.0.0/16", "fe80::/10"])
    assert "link-local" in (policy.refusal(ipaddress.ip_address(address)) or "")


@pytest.mark.parametrize(
    "address", ["127.0.0.1", "::1", "10.1.2.3", "172.16.0.1", "192.168.0.10", "fd00::1", "8.8.8.8"]
)
def test_the_development_policy_allows_loopback_private_and_public_addresses(
    address: str,
) -> None:
    assert AddressPolicy.development().refusal(ipaddress.ip_address(address)) is None


@pytest.mark.parametrize(
    "address",
    [
        "169.254.169.254",
        "fd00:ec2::254",
        "100.100.100.200",
        "169.254.10.10",
        "fe80::a9fe:a9fe",
        "::ffff:169.254.169.254",
        "2002:a9fe:a9fe::",
        "64:ff9b:1:a9fe:a9:fe00::",  # behind a local-use NAT64 /48 (RFC 6052's layout)
        "64:ff9b:1::a9fe:a9fe",  # and a /96 inside it
    ],
)
def test_the_development_policy_still_refuses_metadata_and_link_local(address: str) -> None:
    assert AddressPolicy.development().refusal(ipaddress.ip_address(address)) is not None


async def test_a_name_resolving_to_metadata_is_refused_under_the_development_policy() -> None:
    with pytest.raises(AddressRefused, match="metadata"):
        await check_url(
            "http://metadata.google.internal/computeMetadata/v1/",
            AddressPolicy.development(),
            resolver=ScriptedResolver(["169.254.169.254"]),
        )


@pytest.mark.parametrize(
    "name",
    [
        "Host",
        "Content-Length",
        "Transfer-Encoding",
        "Connection",
        "Metadata-Flavor",
        "Metadata",
        "X-aws-ec2-metadata-token",
        "X-aws-ec2-metadata-token-ttl-seconds",
        "X-Forwarded-For",
        "Proxy-Authorization",
    ],
)
def test_transport_proxy_and_metadata_headers_are_refused(name: str) -> None:
    assert refused_header(name) is not None


@pytest.mark.parametrize("name", ["Authorization", "Cookie", "Accept-Language", "X-Api-Key"])
def test_ordinary_headers_are_allowed(name: str) -> None:
    assert refused_header(name) is None


# --- connect time: a resolver the test controls, servers on two loopback addresses -----------
# 127.0.0.1 stands for a public address (the policy allows exactly it); 127.0.0.2 for an
# internal one. Both listen on the same port, so only the address decides who is reached.


@dataclass
class TwoServers:
    port: int
    hits: dict[str, int]


@pytest.fixture
async def two_servers() -> AsyncIterator[TwoServers]:
    hits = {"127.0.0.1": 0, "127.0.0.2": 0}

    def app(name: str) -> web.Application:
        async def handle(request: web.Request) -> web.StreamResponse:
            hits[name] += 1
            if request.path == "/redirect":
                raise web.HTTPFound(str(request.query["to"]))
            return web.Response(text=name)

        application = web.Application()
        application.router.add_get("/{tail:.*}", handle)
        return application

    public = web.AppRunner(app("127.0.0.1"), access_log=None)
    internal = web.AppRunner(app("127.0.0.2"), access_log=None)
    await public.setup()
    await internal.setup()
    site = web.TCPSite(public, "127.0.0.1", 0)
    await site.start()
    port = int(public.addresses[0][1])
    await web.TCPSite(internal, "127.0.0.2", port).start()
    yield TwoServers(port, hits)
    await public.cleanup()
    await internal.cleanup()


PUBLIC_STAND_IN = AddressPolicy.allowing(["127.0.0.1/32"])


async def test_the_connection_goes_to_the_address_that_was_checked(
    two_servers: TwoServers,
) -> None:
    resolver = ScriptedResolver(["127.0.0.1", "127.0.0.2"])
    connector = guarded_connector(PUBLIC_STAND_IN, resolver=resolver, use_dns_cache=False)
    async with (
        aiohttp.ClientSession(connector=connector) as http,
        http.get(f"http://rebind.test:{two_servers.port}/") as response,
    ):
        assert await response.text() == "127.0.0.1"
    assert resolver.lookups == ["rebind.test"]
    assert two_servers.hits == {"127.0.0.1": 1, "127.0.0.2": 0}


async def test_an_answer_that_changes_after_the_check_is_refused_at_connect(
    two_servers: TwoServers,
) -> None:
    resolver = ScriptedResolver(["127.0.0.1", "127.0.0.2"])
    url = f"http://rebind.test:{two_servers.port}/"
    await check_url(url, PUBLIC_STAND_IN, resolver=resolver)  # when stored: public
    connector = guarded_connector(PUBLIC_STAND_IN, resolver=resolver, use_dns_cache=False)
    async with aiohttp.ClientSession(connector=connector) as http:
        with pytest.raises(aiohttp.ClientError) as raised:
            await http.get(url)
    assert refusal_of(raised.value) is not None
    assert resolver.lookups == ["rebind.test", "rebind.test"]
    assert two_servers.hits["127.0.0.2"] == 0


async def test_an_address_literal_is_checked_at_connect(two_servers: TwoServers) -> None:
    connector = guarded_connector(PUBLIC_STAND_IN)
    async with aiohttp.ClientSession(connector=connector) as http:
        with pytest.raises(aiohttp.ClientError) as raised:
            await http.get(f"http://127.0.0.2:{two_servers.port}/")
    assert isinstance(refusal_of(raised.value), AddressRefused)
    assert two_servers.hits["127.0.0.2"] == 0


async def test_a_redirect_hop_into_an_internal_address_is_refused(
    two_servers: TwoServers,
) -> None:
    connector = guarded_connector(PUBLIC_STAND_IN)
    target = f"http://127.0.0.2:{two_servers.port}/admin"
    async with aiohttp.ClientSession(connector=connector) as http:
        with pytest.raises(aiohttp.ClientError) as raised:
            await http.get(f"http://127.0.0.1:{two_servers.port}/redirect", params={"to": target})
    assert refusal_of(raised.value) is not None
    assert two_servers.hits == {"127.0.0.1": 1, "127.0.0.2": 0}


async def test_a_name_that_resolves_inside_is_refused_when_stored() -> None:
    with pytest.raises(AddressRefused):
        await check_url("http://rebind.test/", STRICT, resolver=ScriptedResolver(["10.0.0.7"]))


LOOPBACK_ONLY = AddressPolicy.allowing(["127.0.0.1/32"])


async def test_a_proxied_name_that_does_not_resolve_here_is_refused() -> None:
    with pytest.raises(AddressRefused, match="does not resolve"):
        await proxy_target(
            "http://metadata.google.internal/", LOOPBACK_ONLY, resolver=ScriptedResolver([None])
        )


async def test_a_stored_name_that_does_not_resolve_yet_is_accepted() -> None:
    await check_url("http://later.test/", LOOPBACK_ONLY, resolver=ScriptedResolver([None]))


async def test_a_proxied_http_url_is_sent_for_the_checked_address_with_its_host() -> None:
    resolver = ScriptedResolver(["127.0.0.1", "127.0.0.2"])
    target = await proxy_target("http://site.test:8080/a?b=1", LOOPBACK_ONLY, resolver=resolver)
    assert target.url == "http://127.0.0.1:8080/a?b=1"
    assert target.host_header == "site.test:8080"
    assert resolver.lookups == ["site.test"]


async def test_a_proxied_name_resolving_inside_is_refused() -> None:
    with pytest.raises(AddressRefused, match="not a public address"):
        await proxy_target("https://inside.test/", STRICT, resolver=ScriptedResolver(["10.0.0.1"]))


@pytest.mark.parametrize(
    ("url", "address", "expected", "host"),
    [
        ("http://site.test/x", "93.184.216.34", "http://93.184.216.34/x", "site.test"),
        (
            "http://u:p@site.test:81/",
            "93.184.216.34",
            "http://u:p@93.184.216.34:81/",
            "site.test:81",
        ),
        ("http://site.test/", "2001:db8::1", "http://[2001:db8::1]/", "site.test"),
        ("http://0x7f.1/", "127.0.0.1", "http://127.0.0.1/", "0x7f.1"),
        # TLS through CONNECT needs the name (SNI, certificate): left as it is.
        ("https://site.test/x", "93.184.216.34", "https://site.test/x", None),
        ("http://127.0.0.1:81/", "127.0.0.1", "http://127.0.0.1:81/", None),
        ("http://[::1]/", "::1", "http://[::1]/", None),
    ],
)
def test_the_url_handed_to_a_proxy(url: str, address: str, expected: str, host: str | None) -> None:
    pinned = pinned_http_url(url, ipaddress.ip_address(address))
    assert (pinned.url, pinned.host_header) == (expected, host)
